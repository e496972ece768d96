"""The OTP message's text (domain/otp.py; docs/api.md, "OTP messages that apps fill in")."""
import pytest

from sandesh.domain.errors import InvalidInput
from sandesh.domain.otp import check_template, check_web_domain, code_text
from sandesh.domain.segments import segment


def test_the_default_text_is_the_one_decided():
    assert code_text("042917", "Daraz") == "042917 is your Daraz verification code. It expires in 5 minutes."


def test_the_app_hash_comes_before_the_webotp_line_which_ends_the_message():
    text = code_text("042917", "Daraz", "{brand} code {code}", "shop.example.com", "FA+9qCX9VSu")
    assert text.split("\n") == ["Daraz code 042917", "FA+9qCX9VSu", "@shop.example.com #042917"]


def test_a_brand_with_braces_is_not_read_as_a_placeholder():
    assert code_text("042917", "{code}", "{brand}: {code}") == "{code}: 042917"


def test_the_longest_message_is_what_must_fit():
    """402 UCS-2 characters are 6 segments; the app hash and the WebOTP line count too."""
    room = 6 * 67 - len("123456") - len("\nFA+9qCX9VSu")
    fits = "{code}" + "क" * room
    assert segment(code_text("123456", "B", fits, None, "FA+9qCX9VSu")).segments == 6
    assert check_template(fits, "B", None) == fits
    with pytest.raises(InvalidInput, match="7 segments"):
        check_template(fits + "क", "B", None)
    with pytest.raises(InvalidInput, match="segments"):
        check_template(fits, "B", "a.example")


@pytest.mark.parametrize("host", ["shop_example.com", "-shop.com", "shop..com", "शप.com", "a" * 64 + ".com", ""])
def test_a_web_domain_is_a_host_name(host):
    with pytest.raises(InvalidInput):
        check_web_domain(host)
