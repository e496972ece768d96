"""E-mail, as the notifier sends a workspace's balance alert to its owners (docs/operations.md,
"Alerts"): one message per owner, handed to the server of SANDESH_SMTP_URL with the standard
library's smtplib.  smtps:// speaks TLS from the start; smtp:// upgrades with STARTTLS when the
server offers it, except on this machine's own relay, and logs in when the URL has a user."""
from __future__ import annotations

import smtplib
import ssl
from email.message import EmailMessage
from email.utils import formataddr
from urllib.parse import unquote, urlsplit

TIMEOUT = 10.0  # seconds for the connection and each command
LOOPBACK = ("localhost", "127.0.0.1", "::1")


def send(smtp_url: str, sender: str, to: str, subject: str, body: str) -> str | None:
    """Hand one message to the server; None when it took it, else why not."""
    url = urlsplit(smtp_url)
    message = EmailMessage()
    message["From"], message["To"], message["Subject"] = formataddr(("Sandesh", sender)), to, subject
    message.set_content(body)
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
    except (OSError, smtplib.SMTPException) as error:
        return f"{type(error).__name__}: {error}"[:300]
