"""Which mobile operator a SIM and a recipient are on, for on-net routing (docs/design.md, "Routing").

A SIM's operator comes from its IMSI: MCC 429 is Nepal, the next two digits are the MNC.
A recipient's comes from the number's prefix: Nepal has no number portability, so the prefix
decides.  The prefix table is the carrier data of the `phonenumbers` library (9.0.x) for
Nepal, copied here so that the send path does not parse numbers a second time;
tests/unit/test_operators.py checks every prefix against that library.  NDCL (974, 975) is
Nepal Doorsanchar Company, that is Nepal Telecom.  Hello Mobile (963) and STM (960) have no
SIMs of their own in our MNC table: their recipients are off-net for every SIM.
"""
from __future__ import annotations

NTC, NCELL, UTL, SMART, HELLO, STM = "ntc", "ncell", "utl", "smart", "hello", "stm"

NAMES = {NTC: "Nepal Telecom", NCELL: "Ncell", UTL: "UTL", SMART: "Smart Telecom",
         HELLO: "Hello Mobile", STM: "STM Telecom"}

MCC_NEPAL = "429"
MNC = {"01": NTC, "02": NCELL, "03": UTL, "04": SMART}

PREFIX = {
    "960": STM,
    "961": SMART, "962": SMART, "988": SMART,
    "963": HELLO,
    "970": NCELL, "971": NCELL, "980": NCELL, "981": NCELL, "982": NCELL,
    "972": UTL,
    "974": NTC, "975": NTC, "976": NTC, "984": NTC, "985": NTC, "986": NTC,
}


def of_imsi(imsi: str | None) -> str | None:
    """The operator of a SIM, from the IMSI its modem reports (AT+CIMI); None when not Nepali."""
    if not imsi or not imsi.startswith(MCC_NEPAL) or len(imsi) < 5:
        return None
    return MNC.get(imsi[3:5])


def of_number(number: str) -> str | None:
    """The operator of a stored recipient number (`977` + 10 digits); None when the prefix is
    not allocated to anyone we know."""
    return PREFIX.get(number[3:6]) if number.startswith("977") else None
