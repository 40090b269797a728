"""The first floor: files and their text, before any parse.

Which files to lint (``discover``, ``gitignore``), their bytes and text (``read``), the comments that turn
findings off (``comments``), and the notebook adapter (``notebook``: code cells <-> one program's text and
positions). Nothing here knows a rule, a tree or a project.
"""
