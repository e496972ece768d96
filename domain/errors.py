"""Domain exceptions: what an operator or caller did that the rules refuse."""


class DomainError(Exception):
    """A rule refused the command; the message is fit to show to the operator."""


class NotFound(DomainError):
    pass


class InvalidInput(DomainError):
    pass


class InvalidTransition(DomainError):
    pass
