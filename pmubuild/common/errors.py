"""The one exception type the pipeline raises for problems a user can fix."""


class PipelineError(Exception):
    """A problem with the input or the environment, with a message that says what to do.

    tasks.py prints the message and exits non-zero; tracebacks are for our own bugs.
    """
