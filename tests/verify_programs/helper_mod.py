"""A project module imported by uses_helper.py: the host read lives here."""


def log_loss(history, loss):
    value = float(loss)  # host read, one level down the call stack
    history.append(value)
    return value
