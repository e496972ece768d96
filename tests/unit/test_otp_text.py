"""The OTP message's text (domain/otp.py; docs/api.md, "OTP messages that apps fill in")."""
import pytest

from sandesh.domain.client import check_brand
from sandesh.domain.errors import InvalidInput
from sandesh.domain.otp import check_template, check_web_domain, code_text
from sandesh.domain.segments import segment

NEPALI = "{brand}: तपाईंको प्रमाणीकरण कोड {code} हो। यो {minutes} मिनेटमा सकिन्छ।"
BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"


def test_the_default_text_is_the_one_decided():
    assert code_text("042917", "Daraz") == "042917 is your Daraz verification code. It expires in 5 minutes."


def test_the_app_hash_comes_before_the_webotp_line_which_ends_the_message():
    text = code_text("042917", "Daraz", "{brand} code {code}", "shop.example.com", "FA+9qCX9VSu")
    assert text.split("\n") == ["Daraz code 042917", "FA+9qCX9VSu", "@shop.example.com #042917"]


def test_a_brand_with_braces_is_not_read_as_a_placeholder():
    assert code_text("042917", "{code}", "{brand}: {code}") == "{code}: 042917"


def test_the_longest_message_is_what_must_fit():
    """402 UCS-2 characters are 6 segments; the brand, the app hash and the WebOTP line count too."""
    most = "{code}" + "{brand}" * 22  # 160 characters
    assert segment(code_text("123456", "क" * 17, most, None, "FA+9qCX9VSu")).segments == 6
    assert check_template(most, "क" * 17, None) == most
    with pytest.raises(InvalidInput, match="7 segments"):
        check_template(most, "क" * 18, None)
    with pytest.raises(InvalidInput, match="segments"):
        check_template(most, "क" * 17, "a.example")


@pytest.mark.parametrize("template", [
    NEPALI, "{code} is your code", "Your code is {code}, valid for {minutes} min. Don't share it.",
    "e.g. Rs.500 off: {code}", "{code} क्\u200dष", "{code}" + "x" * 154])
def test_a_template_of_one_line_of_words_is_accepted(template):
    assert check_template(template, "Sasto", None) == template


@pytest.mark.parametrize("template, said", [
    ("{code}" + "x" * 155, "at most 160 characters (it has 161)"),
    ("Your code:\n{code}", "one line"),
    ("{code}\r", "one line"),
    ("{code}\u2028", "one line"),
    ("{code}\x07", "control character (U+0007)"),
    ("{code}\u200b", "invisible character (U+200B)"),
    ("{code} https://shop.example/login", "web address or domain name ('https://shop.example/login')"),
    ("{code}: verify at paypal.com", "web address or domain name ('paypal.com')"),
    ("{code} at www.daraz", "web address"),
    ("{code} पसल.नेपाल", "web address"),
    ("{code} ｐａｙｐａｌ．ｃｏｍ", "web address"),
    ("Visit {brand}.com: {code}", "web address or domain name ('{brand}.com')"),
    ("{code} @other.example #{code}", "exactly once"),
    ("{code} @shop #1", "'@' followed by '#'"),
    ("@other #{code}", "'@' followed by '#'"),
    ("Not you? Call 9801234567. {code}", "phone number ('9801234567')"),
    ("Not you? Call +977-1-4412345. {code}", "phone number ('+977-1-4412345')"),
    ("Not you? Call ९८०१२३४५६७. {code}", "phone number"),
])
def test_an_otp_template_that_could_phish_is_refused_with_the_reason(template, said):
    """One line of at most 160 characters: no link or domain name, no control or direction
    character, no WebOTP line of its own (`@domain #code`), no phone number."""
    with pytest.raises(InvalidInput) as refused:
        check_template(template, "Sasto", None)
    assert said in str(refused.value)


@pytest.mark.parametrize("control", BIDI)
def test_a_direction_control_is_refused_in_a_template_and_a_brand(control):
    """U+202E makes `{code} moc.lapyap` read as paypal.com: text that reads in another order
    than it is sent."""
    with pytest.raises(InvalidInput, match=f"direction control \\(U\\+{ord(control):04X}\\)"):
        check_template("{code} " + control + "moc.lapyap", "Sasto", None)
    with pytest.raises(InvalidInput, match="direction control"):
        check_brand("Sasto" + control)


@pytest.mark.parametrize("brand, said", [
    ("paypal.com", "web address or domain name ('paypal.com')"),
    ("https://daraz", "web address"),
    ("Nabil\nBank", "one line"),
    ("Nabil\x00", "control character"),
    ("x" * 65, "1 to 64 characters"),
])
def test_a_brand_that_could_phish_is_refused_with_the_reason(brand, said):
    with pytest.raises(InvalidInput) as refused:
        check_brand(brand)
    assert said in str(refused.value)


@pytest.mark.parametrize("brand", ["Sasto", "Himalayan Bank Ltd.", "नबिल बैंक", "S.B. Traders"])
def test_a_brand_of_words_is_accepted(brand):
    assert check_brand(brand) == brand


def test_a_template_kept_from_before_the_rules_that_they_refuse_is_not_sent_the_default_is():
    """Events are forever: a template set before these rules replays as it was, and at send time
    the default text goes instead of it."""
    assert code_text("042917", "Sasto", "{code} is your code. Log in at sasto.example") == \
        "042917 is your Sasto verification code. It expires in 5 minutes."
    assert code_text("042917", "Sasto", "{code}\n@other.example #042917", "shop.example.com") == \
        "042917 is your Sasto verification code. It expires in 5 minutes.\n@shop.example.com #042917"


def test_a_brand_kept_from_before_the_rules_that_they_refuse_is_left_out_of_the_message():
    assert code_text("042917", "paypal.com", "{brand}: {code}") == \
        "042917 is your verification code. It expires in 5 minutes."
    assert code_text("042917", "Pay\u202ePal") == "042917 is your verification code. It expires in 5 minutes."


@pytest.mark.parametrize("host", ["shop_example.com", "-shop.com", "shop..com", "शप.com", "a" * 64 + ".com", ""])
def test_a_web_domain_is_a_host_name(host):
    with pytest.raises(InvalidInput):
        check_web_domain(host)
