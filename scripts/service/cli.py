"""The `sandesh` command: operator and run commands (docs/operations.md, "The sandesh command")."""
from __future__ import annotations


import argparse
import getpass
import os
import sys
from pathlib import Path

from sandesh.domain.alerts import CONDITIONS
from sandesh.domain.errors import DomainError, NeedsNewerRelease
from sandesh.domain.release import VERSION
from sandesh.domain.settings import ConfigurationError, Settings

from .output import fail

ALERT_CONDITIONS = tuple(CONDITIONS)

LOCAL_ENV = Path("var/sandesh.env")  # written by `sandesh up`, read when a variable is not set


def load_local_env(environ: dict[str, str]) -> dict[str, str]:
    merged = dict(environ)
    if LOCAL_ENV.exists():
        for line in LOCAL_ENV.read_text().splitlines():
            name, sep, value = line.partition("=")
            if sep and not line.startswith("#"):
                merged.setdefault(name.strip(), value.strip())
    return merged


CREDENTIAL = "secret_key"  # the name the units' LoadCredential= gives the key
BRAND_HELP = ("the name codes go out under, the operator team's alone: 1 to 64 characters, no web address, domain "
              "name, control or direction character")


def key_from_file(environ: dict[str, str]) -> dict[str, str]:
    """The key from a file, so that it need not sit in the environment: SANDESH_SECRET_KEY_FILE
    (a secrets mount, say), else `secret_key` in $CREDENTIALS_DIRECTORY (systemd's
    LoadCredential=, docs/operations.md, "Production").  Read into this process's settings only,
    never into the environment its children inherit: they read the file themselves."""
    path = environ.get("SANDESH_SECRET_KEY_FILE")
    if not path and environ.get("CREDENTIALS_DIRECTORY"):
        found = Path(environ["CREDENTIALS_DIRECTORY"]) / CREDENTIAL
        path = str(found) if found.is_file() else None
    if not path:
        return environ
    try:
        key = Path(path).read_text().strip()
    except OSError as error:
        raise ConfigurationError(f"SANDESH_SECRET_KEY_FILE: cannot read {path}: {error.strerror}") from None
    if environ.get("SANDESH_SECRET_KEY") and environ["SANDESH_SECRET_KEY"] != key:
        raise ConfigurationError("SANDESH_SECRET_KEY and the key in SANDESH_SECRET_KEY_FILE differ: set one of them")
    return {**environ, "SANDESH_SECRET_KEY": key}


def positive_int(text: str) -> int:
    if not text.isdigit() or int(text) <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive whole number")
    return int(text)


def megabytes(text: str) -> int:
    if not text.isdigit() or int(text) < 64:
        raise argparse.ArgumentTypeError(f"a whole number of megabytes, at least 64, not {text!r}")
    return int(text)


def iso_time(text: str) -> float:
    """A time given as ISO 8601 (`Z` or an offset; none is UTC)."""
    from sandesh.domain.clock import parse_iso

    try:
        return parse_iso(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an ISO 8601 time, e.g. 2026-11-21T00:00:00Z") from None


def hours(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of hours") from None


def profile_choices() -> list[str]:
    from .emulator_profiles import PROFILES

    return list(PROFILES)


def profile_names(text: str) -> str:
    unknown = [name for name in text.split(",") if name not in profile_choices()]
    if unknown:
        raise argparse.ArgumentTypeError(f"no emulator profile {', '.join(unknown)}: choose from "
                                         f"{', '.join(profile_choices())}")
    return text


def network_kinds(text: str) -> str:
    unknown = [name for name in text.split(",") if name and name not in ("hilink", "android")]
    if unknown:
        raise argparse.ArgumentTypeError(f"no network device {', '.join(unknown)}: choose from hilink, android")
    return text


def cap(text: str) -> int | object:
    """A positive whole number, or 'off' (the setting is removed)."""
    from sandesh.domain.sim import CLEAR

    return CLEAR if text == "off" else positive_int(text)


def rupees(text: str) -> int:
    """An amount in NPR with at most two decimals, as paisa."""
    from sandesh.domain.types import parse_npr

    try:
        return parse_npr(text)
    except DomainError as problem:
        raise argparse.ArgumentTypeError(str(problem)) from None


BAUD_HELP = "a serial port's baud rate (default 115200; a HiLink or Android device has none)"
DESTINATION_HELP = "the destination's id (ad_…, from `sandesh alerts list`)"
# The arguments that name a thing by its id, said once for every command that takes them.
RECURRING_HELP = {
    "WS": "the workspace's id (ws_…, from `sandesh workspace list`)",
    "CL": "the client's id (cl_…, from `sandesh client list`)",
    "ID_OR_NAME": "the SIM's id or name (from `sandesh sim list`)",
    "EMAIL": "the person's e-mail address",
    "MESSAGE_ID": "the message's id (msg_…), as its send answered",
}


def _explain_recurring(p: argparse.ArgumentParser) -> None:
    """Every argument of `p` and its subcommands that says no more than its metavar gets the
    sentence RECURRING_HELP has for it."""
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                _explain_recurring(child)
        elif action.help is None and action.metavar in RECURRING_HELP:
            action.help = RECURRING_HELP[action.metavar]


def _sim_limits(c: argparse.ArgumentParser, clearable: bool) -> None:
    """The options of a SIM's plan and balance query (docs/operations.md, "Modems")."""
    number = cap if clearable else positive_int
    off = "; 'off' removes it" if clearable else ""
    c.add_argument("--daily-cap", type=number, metavar="PARTS", help=f"parts a day at most, Nepal time{off}")
    c.add_argument("--monthly-cap", type=number, metavar="PARTS", help=f"parts a calendar month at most, Nepal "
                                                                       f"time{off}")
    c.add_argument("--pace", type=number, metavar="N", help=f"parts per 30 minutes, at most 30 (the default){off}")
    c.add_argument("--balance-ussd", metavar="CODE", help="the USSD code that answers the SIM's credit, e.g. *400#, "
                   f"asked every 4 hours and after every --balance-every parts{'; off removes it' if clearable else ''}")
    c.add_argument("--balance-every", type=number, metavar="PARTS",
                   help=f"ask for the credit again after this many parts (default 50){off}")
    c.add_argument("--min-credit", type=rupees if not clearable else _rupees_or_off, metavar="NPR",
                   help=f"below this credit the SIM is quarantined until a later query finds more (default 10){off}")


def _rupees_or_off(text: str) -> int | object:
    from sandesh.domain.sim import CLEAR

    return CLEAR if text == "off" else rupees(text)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="sandesh", description="Sandesh: SMS and OTP gateway for Nepal.")
    p.add_argument("--version", action="version", version=f"sandesh {VERSION}", help="print the release and exit")
    p.add_argument("--database-url", help="PostgreSQL URL (default: $DATABASE_URL)")
    p.add_argument("--actor", help="who is making this change, for the audit trail (default: $USER)")
    sub = p.add_subparsers(dest="group", required=True, metavar="COMMAND")

    dbp = sub.add_parser("db", help="database commands").add_subparsers(dest="command", required=True)
    dbp.add_parser("migrate", help="create the database, event table and read models (idempotent), and record "
                                   "this release as the one that migrated it")

    upg = sub.add_parser("upgrade", help="the releases sharing the database, and the upgrade gate "
                                         "(docs/operations.md, \"Upgrading\")").add_subparsers(dest="command",
                                                                                                required=True)
    upg.add_parser("status", help="this release, the database's (migrated by, finalized at) and the running "
                                  "processes with theirs")
    c = upg.add_parser("finalize", help="once every process runs this release: write this release's event shapes "
                                        "from now on; older releases then refuse to start (no rollback without a "
                                        "backup)")
    c.add_argument("--force", action="store_true",
                   help="finalize although processes of an older release seem to run (they may stop on events "
                        "they cannot read)")

    key = sub.add_parser("key", help="the server's root key: rotate SANDESH_SECRET_KEY, retire an old one "
                                     "(docs/operations.md, \"Rotating the key\")").add_subparsers(dest="command",
                                                                                                 required=True)
    key.add_parser("status", help="the database's root keys (which one wraps, which are retired) and data keys, "
                                  "the root keys each running process holds, and the secrets due for replacement "
                                  "after a leak")
    c = key.add_parser("rotate", help="make SANDESH_SECRET_KEY the root key: every data key wrapped again under it "
                                      "and a new data key for each use, in every running process within a second; "
                                      "nothing written is written again")
    c.add_argument("--compromised", action="store_true",
                   help="the old key leaked: mark every webhook secret, authenticator app and SIM PIN sealed before "
                        "as due for replacement, stop accepting OTP codes and dashboard forms made before, and give "
                        "each workspace a new key for its texts (docs/operations.md, \"A leaked key\")")
    c = key.add_parser("retire", help="record that an old root key wraps nothing any more, so processes start "
                                      "without it; refuses while it does")
    c.add_argument("key", metavar="KEY_ID", help="the root key's id, from `sandesh key status`")
    ws = sub.add_parser("workspace", help="manage workspaces").add_subparsers(dest="command", required=True)
    c = ws.add_parser("create", help="create a pending workspace")
    c.add_argument("--name", required=True, help="the workspace's name, as its people and the audit see it")
    c.add_argument("--types", help="allowed message types, comma separated (default: all)")
    c.add_argument("--rate", action="append", default=[], metavar="TYPE=PAISA", help="price per segment")
    for verb in ("activate", "suspend", "reinstate", "show"):
        ws.add_parser(verb, help=f"{verb} a workspace").add_argument("workspace", metavar="WS")
    ws.add_parser("list", help="list workspaces")
    c = ws.add_parser("credit", help="add balance, in paisa")
    c.add_argument("workspace", metavar="WS")
    c.add_argument("amount", metavar="PAISA", type=positive_int, help="the amount to add, in paisa (100 = NPR 1)")
    c.add_argument("--note", help="why, for the audit trail (an invoice number, say)")
    c = ws.add_parser("set-rates", help="set prices per segment")
    c.add_argument("workspace", metavar="WS")
    c.add_argument("rates", metavar="TYPE=PAISA", nargs="+",
                   help="a price per segment in paisa for a type (transactional, otp, promotional), e.g. otp=150")
    c = ws.add_parser("shred-texts", help="erase every text of a workspace: destroy the keys they are encrypted"
                      " under (counts, costs and statuses stay; messages still waiting fail, refunded)")
    c.add_argument("workspace", metavar="WS")
    c = ws.add_parser("set-promo-hours", help="when the workspace's promotional messages may go out, in Nepal time "
                                              "(default 08:00-20:00); one accepted outside them waits for the "
                                              "opening (audited as workspace.promo_hours_set)")
    c.add_argument("workspace", metavar="WS")
    c.add_argument("hours", metavar="HOURS", help="HH:MM-HH:MM, e.g. 08:00-20:00 (an end before the start crosses "
                                                 "midnight), or off: promotions never wait")
    c = ws.add_parser("set-help-text", help="what a recipient who replies HELP, SAHAYOG or सहयोग to the workspace's "
                                            "messages is sent, once a day, charged as a transactional send "
                                            "(none by default)")
    c.add_argument("workspace", metavar="WS")
    c.add_argument("text", metavar="TEXT", help="at most 3 SMS; '' for none")
    c = ws.add_parser("set-balance-alert", help="below this balance the workspace's owners are e-mailed "
                                                "(SANDESH_SMTP_URL) and their Overview says so (none by default)")
    c.add_argument("workspace", metavar="WS")
    c.add_argument("npr", metavar="NPR", help="an amount in NPR, such as 500 or 99.50, or off")
    c = ws.add_parser("set-confirmations", help="whether a recipient's opt-out or opt-in by reply is confirmed by "
                                                "SMS, in the language of the word, charged as a transactional send")
    c.add_argument("workspace", metavar="WS")
    c.add_argument("state", choices=("on", "off"), help="on: confirm by SMS; off (the default): do not")
    c = ws.add_parser("set-types", help="set the allowed message types")
    c.add_argument("workspace", metavar="WS")
    c.add_argument("types", metavar="T,T", help="the types it may send, comma separated: transactional, otp, "
                                                "promotional")

    cl = sub.add_parser("client", help="manage API clients").add_subparsers(dest="command", required=True)
    c = cl.add_parser("create", help="create an API client; prints its key and webhook secret once")
    c.add_argument("--workspace", required=True, metavar="WS")
    c.add_argument("--brand", required=True, help=BRAND_HELP)
    c.add_argument("--webhook-url", help="https:// URL its message events are signed and posted to (none by default)")
    c.add_argument("--rate-limit", type=positive_int, metavar="N", help="requests per second (default 20)")
    cl.add_parser("rotate-key", help="new key now; the old one stops at once").add_argument("client", metavar="CL")
    c = cl.add_parser("rotate-secret", help="new webhook secret; the old one signs during the grace period")
    c.add_argument("client", metavar="CL")
    c.add_argument("--grace-hours", type=hours, metavar="H", help="0 to 168 (default 24)")
    for verb in ("disable", "enable", "show"):
        cl.add_parser(verb, help=f"{verb} a client").add_argument("client", metavar="CL")
    cl.add_parser("list", help="list clients").add_argument("--workspace", metavar="WS")
    c = cl.add_parser("update", help="change brand, webhook URL, request rate, the OTP message, or the "
                                      "Sparrow and Aakash drop-in's compat type and keyword services")
    c.add_argument("client", metavar="CL")
    c.add_argument("--brand", help=BRAND_HELP + "; settles a brand the workspace asked for (brandRequested)")
    c.add_argument("--webhook-url", help="https:// URL, or '' to remove it")
    c.add_argument("--rate-limit", type=positive_int, metavar="N", help="requests per second")
    c.add_argument("--otp-template", metavar="TEXT",
                   help="the OTP message, one line of at most 160 characters in any language: {code} once, "
                        "{brand} and {minutes} if you like; no link, domain name, phone number, '@… #…' line, "
                        "control or direction character; '' restores the default")
    c.add_argument("--otp-web-domain", metavar="HOST",
                   help="end the OTP message with '@HOST #code', for WebOTP on that site; '' removes it")
    c.add_argument("--compat-type", choices=("transactional", "otp", "promotional"), metavar="TYPE",
                   help="the message type of its sends through the Sparrow and Aakash drop-in: transactional "
                        "(the default), otp or promotional")
    c.add_argument("--keyword", action="append", default=[], metavar="WORD",
                   help="give it a keyword (repeatable): an SMS to the pool whose first word is WORD is this "
                        "client's, and its reply URL answers it; unique across the pool")
    c.add_argument("--no-keyword", action="append", default=[], metavar="WORD", help="take a keyword back")
    c.add_argument("--reply-url", metavar="URL",
                   help="called with GET ?from=&to=&text=&keyword= for each keyword SMS; its answer goes back by "
                        "SMS; https:// (http:// where private addresses are allowed); '' removes it")
    c.add_argument("--default-reply", metavar="TEXT",
                   help="the one SMS sent back when the reply URL fails or there is none; '' removes it")

    al = sub.add_parser("alerts", help="alerts that reach the operators: a SIM down or low on credit, no route, "
                                       "OTPs waiting, webhooks failing, the read models lagging, a workspace's "
                                       "balance low (docs/operations.md, \"Alerts\")").add_subparsers(
        dest="command", required=True)
    c = al.add_parser("add", help="a destination: sms:+977… (an SMS through the pool, charged to no one), or an "
                                  "Apprise URL (mailto://, tgram://, ntfy://, json://…)")
    c.add_argument("url", metavar="URL", help="sms:+977 and 10 digits, or an Apprise URL; its password is sealed")
    c.add_argument("--only", metavar="CONDITION,…", default="",
                   help="only these conditions (default: all): " + ", ".join(ALERT_CONDITIONS) +
                        "; and 'digest' for the daily digest, which a destination with all conditions gets too")
    al.add_parser("list", help="the destinations (their passwords hidden)")
    al.add_parser("remove", help="remove a destination").add_argument("destination", metavar="ID",
                                                                      help=DESTINATION_HELP)
    c = al.add_parser("test", help="send a test message to every destination, or one")
    c.add_argument("destination", metavar="ID", nargs="?", help=DESTINATION_HELP + " (default: every one)")
    al.add_parser("status", help="the alerts that hold now, and since when, the last ended ones, and the last "
                                 "daily digest with how many destinations it reached")
    c = al.add_parser("tune", help="how long a condition must hold before it alerts, or turn it off or on")
    c.add_argument("condition", choices=ALERT_CONDITIONS, metavar="CONDITION",
                   help=", ".join(ALERT_CONDITIONS))
    tuned = c.add_mutually_exclusive_group(required=True)
    tuned.add_argument("--after", type=float, metavar="SECONDS", help="hold this long first")
    tuned.add_argument("--off", action="store_true", help="never alert on it")
    tuned.add_argument("--default", action="store_true", help="back to its default delay")
    c = al.add_parser("interval", help="how long after an alert ended the same one is not raised again "
                                       "(default 600 seconds)")
    spaced = c.add_mutually_exclusive_group(required=True)
    spaced.add_argument("seconds", type=float, metavar="SECONDS", nargs="?", help="the interval, in seconds")
    spaced.add_argument("--default", action="store_true", help="back to 600 seconds")
    c = al.add_parser("digest", help="each day from HH:MM (Nepal time), one message to the destinations (those "
                                     "with all conditions, or naming 'digest'): the day before's messages accepted, "
                                     "delivered, undelivered and failed, its alerts, and the pool as it stands; "
                                     "'off' (the default) for none")
    c.add_argument("time", metavar="HH:MM|off", help="the time of day, Nepal time, e.g. 08:00; or off")

    us = sub.add_parser("user", help="people who sign in to the dashboard").add_subparsers(dest="command",
                                                                                           required=True)
    c = us.add_parser("add", help="add a person to a workspace (or the operator team); prints their one-time "
                                  "link, valid 24 hours, where they set a password")
    c.add_argument("--email", required=True, help="their e-mail address, with which they sign in")
    c.add_argument("--name", required=True, help="their name, as the dashboard and the audit show it")
    c.add_argument("--workspace", metavar="WS", help="the workspace they join (or --operator)")
    c.add_argument("--role", choices=["owner", "developer", "sender", "viewer"],
                   help="owner: manages the workspace and its people; developer: clients, keys, webhooks, "
                        "opt-outs; sender: sends from the dashboard and sees what was sent; viewer: reads only")
    c.add_argument("--operator", action="store_true", help="a member of the operator team (sees every workspace)")
    us.add_parser("list", help="people, oldest first (never a password or a link)").add_argument(
        "--workspace", metavar="WS")
    for verb, text in (("disable", "the person can no longer sign in; their sessions end at once"),
                       ("enable", "let a disabled person sign in again"),
                       ("reset", "a new one-time set-password link (the previous one stops at once); printed")):
        us.add_parser(verb, help=text).add_argument("email", metavar="EMAIL")

    sim = sub.add_parser("sim", help="manage SIMs").add_subparsers(dest="command", required=True)
    c = sim.add_parser("add", help="register a modem port (docs/operations.md, \"Modems\": probe it first)")
    c.add_argument("--name", required=True, help="a name for the SIM, unique in the pool (ntc-1, say)")
    c.add_argument("--port", required=True, metavar="DEVICE",
                   help="/dev/serial/by-id/..., /dev/ttyUSB0, a pyserial URL, hilink://[USER:PASSWORD@]HOST[:PORT] or "
                        "android://USER:PASSWORD@HOST[:PORT][?signing_key=KEY] (a password and key are sealed; '-' reads it from stdin)")
    c.add_argument("--baud", type=positive_int, default=115200, help=BAUD_HELP)
    c.add_argument("--host", help="the dispatcher host that drives it (default: any)")
    _sim_limits(c, clearable=False)
    sim.add_parser("list", help="list SIMs with their state (active, resting, disabled, quarantined, unreachable), "
                                "reason, since, the device and the modes chosen for it, operator, credit, and "
                                "parts used in the pacing window, today and this month")
    for verb, text in (("disable", "take a SIM out of the pool; running dispatchers stop leasing to it within 1 s"),
                       ("enable", "put a disabled SIM back into the pool"),
                       ("release", "lift a quarantine (audited as sim.released)")):
        sim.add_parser(verb, help=text).add_argument("sim", metavar="ID_OR_NAME")
    c = sim.add_parser("update", help="a new port, baud rate, host, PIN or limits; running dispatchers use them "
                                      "within 1 s")
    c.add_argument("sim", metavar="ID_OR_NAME")
    c.add_argument("--port", metavar="DEVICE", help="its new port, in any form `sim add` takes")
    c.add_argument("--baud", type=positive_int, help="a serial port's new baud rate")
    c.add_argument("--host", help="the dispatcher host that drives it")
    c.add_argument("--pin", metavar="NNNN", help="the SIM's PIN, 4 to 8 digits, kept sealed and entered when the "
                   "SIM asks for it ('-' reads it from stdin; 'off' removes it); a new PIN ends a quarantine for a "
                   "refused one")
    _sim_limits(c, clearable=True)
    c = sim.add_parser("probe", help="identify the device on a port and negotiate with it as a dispatcher would, "
                                     "without registering it: what it is, what it supports and what Sandesh would "
                                     "use, or which step failed and how the device answered")
    c.add_argument("port", metavar="PORT", help="/dev/serial/by-id/..., /dev/ttyUSB0, a pyserial URL, or a "
                                                "hilink:// or android:// URL as `sim add` takes it")
    c.add_argument("--baud", type=positive_int, default=115200, help=BAUD_HELP)
    c.add_argument("--pin", metavar="NNNN", help="the PIN to enter if the SIM asks for one ('-' reads it from stdin)")
    text = ("list this host's serial ports (by /dev/serial/by-id name where there is one), identify what answers "
            "AT on each, all at once (2 s at most for a silent port), and the registered SIM with its ICCID; a table "
            "on a terminal, else JSON. Changes nothing without --apply; never opens a port a running dispatcher "
            "holds, never enters or prints a PIN (docs/operations.md, \"Discovering modems\")")
    c = sim.add_parser("discover", help=text, description=text)
    c.add_argument("--ports", action="append", metavar="GLOB",
                   help="ask these ports instead of the serial devices pyserial lists, e.g. "
                        "'/dev/serial/by-id/*' (symlinks kept as named; repeatable). A port named exactly, without a "
                        "wildcard, that a dispatcher holds is an error; a held port a wildcard found is shown as held")
    c.add_argument("--hilink", metavar="[USER:PASSWORD@]HOST[,...]",
                   help="where to look for HiLink sticks and routers (default: 192.168.8.1 and this host's gateways, "
                        "unless --ports is given; 'none' for nowhere), with a router's login where it needs one, "
                        "which --apply seals and nothing prints; '-' reads the list from stdin")
    c.add_argument("--apply", action="store_true",
                   help="register the SIMs not registered yet and move registered ones whose ICCID answers on "
                        "another port (audited as sim.added and sim.port_changed)")
    c.add_argument("--name-prefix", metavar="P",
                   help="with --apply, name new SIMs P1, P2, ... (skipping names taken) instead of the operator "
                        "and the ICCID's last digits (ntc-4821)")
    c.add_argument("--host", help="with --apply, the dispatcher host that drives the SIMs added (default: any)")
    c.add_argument("--baud", type=positive_int, default=115200, help="the baud rate to ask at and register with "
                                                                     "(default 115200)")
    c.add_argument("--json", action="store_true", help="print one JSON object even on a terminal")

    sms = sub.add_parser("sms", help="the global SMS switch").add_subparsers(dest="command", required=True)
    sms.add_parser("disable", help="switch sending off (503 sms_disabled)").add_argument(
        "--reason", help="why, kept with the switch and in the audit trail")
    sms.add_parser("enable", help="switch sending on")

    oo = sub.add_parser("optout", help="numbers that get no promotional messages of a workspace (a STOP reply, "
                                        "or an operator)").add_subparsers(dest="command", required=True)
    for verb, text in (("add", "opt a number out of the workspace's promotional messages (audited as optout.added)"),
                       ("remove", "let the number get the workspace's promotional messages again (audited as "
                                  "optout.removed)")):
        c = oo.add_parser(verb, help=text)
        c.add_argument("workspace", metavar="WS")
        c.add_argument("number", metavar="NUMBER", help="977 and 10 digits, e.g. 9779812345678 (a leading + is allowed)")
    oo.add_parser("list", help="the workspace's opted-out numbers, oldest first, with since when and why (source: "
                               "reply or operator)").add_argument("workspace", metavar="WS")

    inbound = sub.add_parser("inbound", help="replies from recipients").add_subparsers(dest="command", required=True)
    c = inbound.add_parser("list", help="received replies, newest first")
    c.add_argument("--unattributed", action="store_true", help="only replies no client could be found for")
    c.add_argument("--limit", type=positive_int, default=50, metavar="N", help="at most N (default 50)")

    msg = sub.add_parser("message", help="what happened to a message").add_subparsers(dest="command", required=True)
    msg.add_parser("history", help="the message's whole life from the log, oldest first: acceptance, submits "
                               "(SIM, parts, TP-MR), requeues, status reports, refunds, replies, every webhook "
                               "attempt").add_argument("message", metavar="MESSAGE_ID")

    wh = sub.add_parser("webhooks", help="webhook deliveries of the last 7 days").add_subparsers(dest="command",
                                                                                                required=True)
    c = wh.add_parser("list", help="deliveries, newest first, with their last attempt")
    c.add_argument("--client", metavar="CL", help="only this client's deliveries")
    c.add_argument("--state", choices=["attempting", "waiting", "delivered", "dead"],
                   help="attempting: first attempt due; waiting: a retry is scheduled; dead: no more attempts")
    c.add_argument("--limit", type=positive_int, default=100, metavar="N", help="at most N (default 100)")
    wh.add_parser("show", help="one delivery with every attempt and its body").add_argument(
        "delivery", metavar="ID", help="the delivery's id (whd_…, from `sandesh webhooks list` or the webhook's "
                                       "x-service-delivery header)")
    c = wh.add_parser("redeliver", help="send events again: one delivery as a new delivery (ID), or every dead or "
                                        "waiting delivery of a client over a span of the last 7 days, in their "
                                        "original order, with their own ids (--client, --since); audited")
    c.add_argument("delivery", metavar="ID", nargs="?", help="one delivery, sent again as a new delivery")
    c.add_argument("--client", metavar="CL", help="redeliver what this client's receiver missed (with --since)")
    c.add_argument("--since", type=iso_time, metavar="ISO", help="deliveries created from this time, e.g. "
                                                                 "2026-11-24T06:00:00Z")
    c.add_argument("--until", type=iso_time, metavar="ISO", help="and up to this time (default: now)")
    c.add_argument("--state", choices=["dead", "waiting"], help="only dead (no more attempts) or only waiting (a "
                                                                "retry is scheduled) deliveries (default: both)")

    a = sub.add_parser("audit", help="operator changes, oldest first, as JSON lines")
    a.add_argument("--workspace", metavar="WS", help="only changes to this workspace and its clients and people")
    a.add_argument("--client", metavar="CL", help="only changes to this client")
    a.add_argument("--since", metavar="ISO", help="e.g. 2026-11-21T00:00:00Z")
    a.add_argument("--limit", type=positive_int, metavar="N", help="keep the N most recent")

    s = sub.add_parser("serve", help="run the API under gunicorn")
    s.add_argument("--bind", default="127.0.0.1:8000", metavar="HOST:PORT",
                   help="the address to listen on (default 127.0.0.1:8000; 0.0.0.0:8000 for every interface)")
    s.add_argument("--workers", type=positive_int,
                   help="worker processes, each kept to the core with the fewest workers (default: one per core)")
    s.add_argument("--worker-connections", type=positive_int, metavar="N",
                   help="open connections a worker process holds at most; past it a new one is answered 503 at "
                        "once and closed (default: 1000)")

    w = sub.add_parser("worker", help="run workers that follow the log (until SIGTERM or Ctrl-C)")
    w.add_argument("command", choices=["dispatch", "webhooks", "projections", "notifier", "all"], metavar="NAME",
                   help="dispatch: drive the SIMs and send queued messages; webhooks: sign and deliver events to "
                        "clients' webhook URLs, with retries; projections: keep the read models up to date; "
                        "notifier: raise and clear the operators' alerts; all: every worker, each in its own process")
    w.add_argument("--host", help="the host whose SIMs a dispatcher drives (default: every SIM)")

    r = sub.add_parser("replay", help="rebuild read models from the log, beside the live ones, then swap")
    r.add_argument("names", nargs="*", metavar="PROJECTION",
                   help="registry, messages, counters, otps, audit, campaigns, feed (default: all)")
    r.add_argument("--check", action="store_true",
                   help="rebuild beside the live tables and compare them row for row without swapping; prints "
                        "rows compared and rows that differ per table, exits 1 when any differ")
    r.add_argument("--from-checkpoint", action="store_true",
                   help="start from each projection's checkpoint (`sandesh checkpoint`) and fold only the events after it")
    r.add_argument("--since-checkpoint", action="store_true",
                   help="with --check: check only the events after each projection's checkpoint")
    r.add_argument("--memory-mb", type=megabytes, metavar="MB",
                   help="the memory the replay may hold, whatever the log's length (default SANDESH_REPLAY_MEMORY_MB, "
                        "else 1024): rows past it wait in the tables being built")

    cp = sub.add_parser("checkpoint", help="fold the log into a checkpoint of each read model, from the previous "
                                           "one on, kept once it equals a fresh fold from zero "
                                           "(docs/operations.md, \"Checkpoints\")")
    cp.add_argument("names", nargs="*", metavar="PROJECTION",
                    help="registry, messages, counters, otps, audit, campaigns, feed (default: all)")
    cp.add_argument("--from-zero", action="store_true", help="fold the whole log, not from the previous checkpoint on")
    cp.add_argument("--memory-mb", type=megabytes, metavar="MB", help="as for replay")

    em = sub.add_parser("emulator", help="virtual GSM modems on pseudo-terminals, for development and tests")
    em.add_argument("--sims", type=positive_int, default=2, metavar="N", help="how many modems (default 2)")
    em.add_argument("--register", action="store_true", help="register them as SIMs (or move registered ones)")
    em.add_argument("--phones-log", metavar="PATH", help="where to write what the phones received, as JSON lines")
    em.add_argument("--report-delay", type=float, default=2.0, metavar="S", help="seconds before a status report")
    em.add_argument("--profile", default="3gpp", metavar="NAME[,NAME...]", type=profile_names,
                    help="the device family each modem plays, in turn: " + ", ".join(profile_choices()) +
                         " (docs/operations.md, \"Modems\"; default 3gpp)")
    em.add_argument("--cmgs-seconds", type=float, metavar="S",
                    help="the network's time to accept a part (default: the profile's, a few seconds for real "
                         "devices)")
    em.add_argument("--network", default="", metavar="KIND[,KIND]", type=network_kinds,
                    help="devices on the network beside the modems: hilink (a HiLink stick), android (a phone "
                         "running SMS Gateway for Android)")

    up = sub.add_parser("up", help="everything for a first look: database, demo client, API and workers")
    up.add_argument("--bind", default="127.0.0.1:8000", metavar="HOST:PORT", help="where the API listens (default "
                                                                                   "127.0.0.1:8000)")
    up.add_argument("--emulate", default="", metavar="KIND[,KIND]", type=network_kinds,
                    help="also emulate devices on the network: hilink, android")

    clk = sub.add_parser("clock", help="the test clock (SANDESH_CLOCK=test)").add_subparsers(dest="command", required=True)
    clk.add_parser("show", help="the service time and offset")
    clk.add_parser("advance", help="move the test clock forward").add_argument(
        "seconds", type=float, metavar="SECONDS", help="how far, in seconds")
    _explain_recurring(p)
    return p


def actor_of(args: argparse.Namespace) -> str:
    if args.actor:
        return args.actor
    try:
        return os.environ.get("USER") or getpass.getuser()
    except Exception:
        return "operator"


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    environ = load_local_env(dict(os.environ))
    if args.database_url:
        environ["DATABASE_URL"] = args.database_url
    try:
        settings = Settings.from_env(key_from_file(environ))
        return run(args, settings)
    except (DomainError, ConfigurationError) as error:
        return fail(str(error))
    except NeedsNewerRelease as error:
        return fail(str(error), NeedsNewerRelease.exit_status)
    except KeyboardInterrupt:
        return 130
    except Exception as error:
        from sandesh.projections.storage.health import DatabaseUnavailable

        if isinstance(error, DatabaseUnavailable):
            return fail(str(error), 1)
        raise


def words(args: argparse.Namespace) -> tuple[str, ...]:
    """The subcommand as typed: ("workspace", "create"), ("audit",), ("worker", "all")."""
    command = getattr(args, "command", None)
    return (args.group, command) if command else (args.group,)


def run(args: argparse.Namespace, settings: Settings) -> int:
    from .commands import COMMANDS

    return COMMANDS[words(args)](args, settings, actor_of(args))


if __name__ == "__main__":
    sys.exit(main())
