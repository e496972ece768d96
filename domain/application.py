"""Sandesh: every use case of the service, by context (domain/usecases/), built from the
dependencies the wiring gives (scripts/service/bootstrap.py over PostgreSQL; tests/memory.py in memory).
Nothing is attached after construction: a use case has what it needs or is not built."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .clock import Clock
from .ports import (CampaignProgress, ContactBook, Drafts, IdempotencyKeys, OptOuts, OtpWindows, PasswordHasher, Sealer,
                    SendingStates, Sessions, SignInTries, Texts, WebhookHistory)
from .usecases.alerts import Alerts
from .usecases.campaigns import Campaigns
from .usecases.contacts import Contacts
from .usecases.dispatch import Dispatch
from .usecases.history import History
from .usecases.keys import Secrets
from .usecases.log import Log
from .usecases.operators import Operators
from .usecases.otp import Otps
from .usecases.people import People
from .usecases.sending import BatchAnswer, Sending
from .usecases.services import KeywordServices
from .usecases.sims import Sims
from .usecases.webhooks import Webhooks


@dataclass(frozen=True)
class Sandesh:
    log: Log
    clock: Clock
    texts: Texts
    operators: Operators
    sims: Sims
    sending: Sending
    otp: Otps
    dispatch: Dispatch
    webhooks: Webhooks
    history: History
    people: People
    secrets: Secrets
    campaigns: Campaigns
    contacts: Contacts
    services: KeywordServices
    alerts: Alerts

    @classmethod
    def build(cls, log: Log, *, clock: Clock, sealer: Sealer, texts: Texts, idempotency: IdempotencyKeys,
              otp_windows: OtpWindows, opt_outs: OptOuts, otp_keys: Callable[[], tuple[bytes, ...]], append: Callable[..., None],
              batch_answer: BatchAnswer, webhook_guard: Callable[[str], None], hasher: PasswordHasher,
              sign_in_tries: SignInTries, sessions: Sessions, webhook_history: WebhookHistory,
              sending_states: SendingStates, drafts: Drafts, contact_book: ContactBook,
              campaign_progress: CampaignProgress) -> Sandesh:
        """`append` appends sends (the API's group commit, or the log's `save`); `batch_answer`
        renders a batch's 202 body, kept for its Idempotency-Key; `webhook_guard` refuses a
        webhook URL inside the network; `hasher` hashes dashboard passwords, `sign_in_tries`
        keeps the tries to sign in for their throttle, `sessions` ends a person's dashboard sessions;
        `webhook_history` finds the deliveries an operator redelivers; `otp_keys` gives the keys of OTP
        code hashes, the one that makes them first (projections/storage/keys.py, RingHashes); the Send
        page's use cases read the workspace's `sending_states`, keep previews in `drafts`, read
        contact lists and templates from `contact_book`, and a campaign's `campaign_progress`."""
        sending = Sending(log, clock, texts, idempotency, opt_outs, append, batch_answer)
        return cls(
            log=log, clock=clock, texts=texts,
            operators=Operators(log, clock, sealer, texts, webhook_guard),
            sims=Sims(log, clock, sealer),
            sending=sending,
            otp=Otps(log, clock, texts, otp_windows, otp_keys, append),
            dispatch=Dispatch(log, clock, texts, sending),
            webhooks=Webhooks(log, clock, sealer, webhook_history),
            history=History(log, texts),
            people=People(log, clock, hasher, sign_in_tries, sealer, sessions),
            secrets=Secrets(log, sealer),
            campaigns=Campaigns(log, clock, texts, opt_outs, sending, sealer, sending_states, drafts, contact_book,
                                campaign_progress),
            contacts=Contacts(log, clock, texts),
            services=KeywordServices(log, clock, texts, sending),
            alerts=Alerts(log, clock, sealer, sending),
        )

    def close(self) -> None:
        self.log.close()
