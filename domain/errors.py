"""Domain exceptions: what an operator or caller did that the rules refuse."""


class DomainError(Exception):
    """A rule refused the command; the message is fit to show to the operator."""


class NotFound(DomainError):
    pass


class InvalidInput(DomainError):
    pass


class InvalidTransition(DomainError):
    pass


class InsufficientBalance(DomainError):
    """The guarded debit would take the workspace balance below zero."""


class IdempotencyKeyTaken(DomainError):
    """Another request committed a message under the same Idempotency-Key first."""


class OtpLimited(DomainError):
    """An OTP limit of interface §Limits is full: `limit` names which; `retry_after` in seconds
    when the domain knows it (the resend cooldown)."""

    def __init__(self, limit: str, retry_after: float | None = None):
        super().__init__(limit)
        self.limit = limit
        self.retry_after = retry_after
