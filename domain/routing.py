"""Which SIM takes which waiting message now (docs/design.md, "Routing").

The dispatcher reads the head of the queue in priority order and offers its idle SIMs; this
module decides, message by message, in that order:

1. Pacing: a SIM takes a message only when its window has room for every part; anything but
   an OTP also leaves the pool's OTP reserve untouched.
2. Sticky sender: a recipient stays on the SIM it last heard from while that SIM is usable
   and has room, so replies are attributed to the right client.  An OTP never waits for it.
3. Failover: a message that failed on a SIM goes to another one with room; back to a SIM it
   failed on only after the retry delay, and only when no other usable SIM has room.
4. Operator: among the SIMs left, those on the recipient's operator first; never waiting for
   one, so affinity never delays a message.  Among equals, the SIM that has sent least takes
   it (then the one with most window left): that spreads the load evenly, and makes the part
   the pool holds for OTP stay on whichever SIM has sent most, so it moves from SIM to SIM.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Offer:
    """An idle SIM of this dispatcher that can take a message now."""
    sim_id: str
    operator: str | None
    left: int            # parts of its pacing window left
    sent: int = 0        # parts it has sent since its dispatcher started


@dataclass(frozen=True)
class Waiting:
    """A message at the head of the queue, as the lease reads it."""
    message_id: str
    message_type: str
    parts: int
    operator: str | None
    failed_on: tuple[str, ...] = ()
    retry_at: float = 0.0          # service clock: when a SIM it failed on may try it again
    sticky_sim: str | None = None  # the SIM that last sent to this recipient


@dataclass
class Pool:
    """What the choice needs to know beyond the offers."""
    free: int                      # parts left in the windows of every usable SIM of the pool
    reserve: int                   # parts of that only OTP may use
    elsewhere: set[str] = field(default_factory=set)  # usable SIMs with room that are not offered now
    holder: str | None = None      # the SIM that keeps the reserve: of the usable ones, the one that has sent most


def assign(waiting: list[Waiting], offers: list[Offer], pool: Pool, now: float) -> list[tuple[Waiting, Offer]]:
    """Pairs of (message, SIM), at most one message per SIM, in the queue's order."""
    offers = list(offers)
    chosen: list[tuple[Waiting, Offer]] = []
    for message in waiting:
        if not offers:
            break
        offer = choose(message, offers, pool, now)
        if offer is None:
            continue
        chosen.append((message, offer))
        offers.remove(offer)
        pool.free -= message.parts
        if offer.left > message.parts:  # busy now, with room for its recipients' next messages
            pool.elsewhere.add(offer.sim_id)
    return chosen


def choose(message: Waiting, offers: list[Offer], pool: Pool, now: float) -> Offer | None:
    if message.message_type != "otp" and pool.free - message.parts < pool.reserve:
        return None
    # The reserve stays on the SIM that has sent most, so under a backlog it moves from SIM to SIM
    # and each SIM reaches its cap in turn.
    keep = 0 if message.message_type == "otp" else pool.reserve
    fitting = [o for o in offers if o.left >= message.parts + (keep if o.sim_id == pool.holder else 0)]
    if message.sticky_sim is not None and message.message_type != "otp" and message.sticky_sim not in message.failed_on:
        sticky = [o for o in fitting if o.sim_id == message.sticky_sim]
        if sticky:
            return sticky[0]
        if message.sticky_sim in pool.elsewhere:
            return None  # its SIM is busy or on another host: it takes the message soon
    fresh = [o for o in fitting if o.sim_id not in message.failed_on]
    if not fresh:
        others_with_room = pool.elsewhere - set(message.failed_on)
        if now < message.retry_at or others_with_room:
            return None
        fresh = fitting
    if not fresh:
        return None
    return min(fresh, key=lambda o: (o.operator is None or o.operator != message.operator, o.sent, -o.left))


MAX_ATTEMPTS = 5      # submissions of one message that ended back in the queue, at most
RETRY_DELAY = 30.0    # seconds before a SIM that refused a message may try it again

REJECT, FAIL, REQUEUE = "reject", "fail", "requeue"


def after_refusal(action: str, *, attempts: int, ever_accepted: bool, tried: set[str],
                  usable: set[str]) -> tuple[str, str]:
    """What becomes of a message whose SIM proved it did not send a part (docs/design.md, "Failures of a send"):
    `(REJECT | FAIL | REQUEUE, why)`.  `attempts` counts the earlier refusals, `tried` the SIMs
    that refused it (this one included), `usable` the SIMs of the pool that could send now."""
    if action == "reject":
        return REJECT, "the network refused the number"
    if action == "alert":
        return FAIL, "the modem refused our PDU"
    if ever_accepted:
        return FAIL, "part of it was sent already, so it is not sent again"
    if attempts + 1 >= MAX_ATTEMPTS:
        return FAIL, f"refused {MAX_ATTEMPTS} times"
    if usable and usable <= tried:
        return FAIL, f"refused on every usable SIM ({len(tried)})"
    return REQUEUE, "sent on to another SIM"
