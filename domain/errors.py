"""Domain exceptions: what an operator or caller did that the rules refuse."""


class DomainError(Exception):
    """A rule refused the command; the message is fit to show to the operator."""


class NotFound(DomainError):
    pass


class InvalidInput(DomainError):
    pass


class InvalidRequest(DomainError):
    """A request body the rules refuse once the caller's state is known (400 invalid_request,
    with one detail: the field's `path`, the message and a `code`)."""

    def __init__(self, path: list[str], message: str, code: str):
        super().__init__(message)
        self.path, self.message, self.code = path, message, code


class InvalidTransition(DomainError):
    pass


class Contended(DomainError):
    """A change lost every race for the aggregate's version it was retried on."""


class GuardRefused(DomainError):
    """A guard of the store (a CHECK, a unique key, a window limit) refused the whole append.
    The store raises these subclasses itself (projections/storage/store.py, GUARDS); nothing matches
    error text."""


class InsufficientBalance(GuardRefused):
    """The guarded debit would take the workspace balance below zero."""

    def __init__(self, message: str = "the workspace balance is lower than the message cost", cost: int | None = None):
        super().__init__(message)
        self.cost = cost


class IdempotencyKeyTaken(GuardRefused):
    """Another request committed a message under the same Idempotency-Key first."""


class NameTaken(GuardRefused, InvalidInput):
    """A name or identity that must be unique (a SIM's name, its ICCID) is registered already."""


class NotCancelable(DomainError):
    """Only a scheduled or queued message that no modem was handed yet can be canceled;
    `status` is the message's status now."""

    def __init__(self, status: str):
        super().__init__(status)
        self.status = status


class Refused(DomainError):
    """A send the caller's state refuses (docs/api.md, "Order of checks"): `code` is the API error
    code: forbidden, sms_disabled, unavailable or recipient_opted_out."""

    def __init__(self, code: str):
        super().__init__(code)
        self.code = code


class IdempotencyConflict(DomainError):
    """The Idempotency-Key cannot be used for this request: `reason` is RUNNING (a twin holds
    it now) or DIFFERENT_BODY (it was used with another body)."""

    RUNNING = "running"
    DIFFERENT_BODY = "different_body"

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class OtpLimited(GuardRefused):
    """An OTP limit (docs/api.md, "OTP") is full: `limit` names which; `retry_after` in seconds
    when the domain knows it (the resend cooldown)."""

    def __init__(self, limit: str, retry_after: float | None = None):
        super().__init__(limit)
        self.limit = limit
        self.retry_after = retry_after


class NeedsNewerRelease(Exception):
    """The database holds what only a newer release can read: an event of a type or version
    this code does not know, or a log finalized at a newer release (docs/operations.md,
    "Upgrading").  The process stops with this message rather than misread or skip anything.
    Not a DomainError: nothing the caller did, and nothing to answer as a refusal."""
    exit_status = 3  # of a `sandesh` command or worker that stops on it
