"""E-mail, as the notifier sends a workspace's balance alert to its owners (docs/operations.md,
"Alerts"): one message per owner, handed to the server of SANDESH_SMTP_URL with the standard
library's smtplib.  smtps:// speaks TLS from the start; smtp:// upgrades with STARTTLS when the
server offers it, except on this machine's own relay, and logs in when the URL has a user.

A subject that is not ASCII (an owner's Nepali) is encoded as compat32's `Header` encodes it,
the spaces inside its encoded words: `EmailMessage`'s folding of a long one loses the space
between two encoded words, and the reader sees `ब्यालेन्स:कार्यक्षेत्र`."""
from __future__ import annotations

import smtplib
import ssl
from email.charset import QP, Charset
from email.header import Header
from email.mime.text import MIMEText
from email.utils import formataddr
from urllib.parse import unquote, urlsplit

TIMEOUT = 10.0  # seconds for the connection and each command
LOOPBACK = ("localhost", "127.0.0.1", "::1")
UTF8 = Charset("utf-8")
UTF8.body_encoding = QP  # an English body stays readable as it travels


def send(smtp_url: str, sender: str, to: str, subject: str, body: str) -> str | None:
    """Hand one message to the server; None when it took it, else why not.  The subject is one
    line whatever it is given (a workspace's name could hold a line break, and with it a header)."""
    url = urlsplit(smtp_url)
    subject = " ".join(subject.split())
    message = MIMEText(body, "plain", UTF8)
    message["From"], message["To"] = formataddr(("Sandesh", sender)), to
    message["Subject"] = subject if subject.isascii() else Header(subject, "utf-8")  # type: ignore[assignment]
    try:
        if url.scheme == "smtps":
            server: smtplib.SMTP = smtplib.SMTP_SSL(url.hostname or "", url.port or 465, timeout=TIMEOUT,
                                                    context=ssl.create_default_context())
        else:
            server = smtplib.SMTP(url.hostname or "", url.port or 25, timeout=TIMEOUT)
        with server:
            server.ehlo()
            if url.scheme == "smtp" and url.hostname not in LOOPBACK and server.has_extn("starttls"):
                server.starttls(context=ssl.create_default_context())
                server.ehlo()
            if url.username:
                server.login(unquote(url.username), unquote(url.password or ""))
            server.send_message(message)
        return None
    except Exception as error:  # noqa: BLE001 - a server's or a message's failure is recorded, never kills the loop
        return f"{type(error).__name__}: {error}"[:300]
