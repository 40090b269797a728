"""The fifth floor, above the semantic model and the rules: findings from text.

``module``: one module, one parse, one walk with every enabled rule, exported as plain data;
``decision``: the findings of a project, decided from its modules' analyses over the whole call graph;
``source``: one file's contents on their own (a project of one module);
``file_findings``: findings about a file as a whole (XLA900/901), and internal errors (XLA902).
"""
