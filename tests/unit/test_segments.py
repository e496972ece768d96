import pytest
from hypothesis import given
from hypothesis import strategies as st

from sandesh.domain.segments import (
    GSM7, GSM7_BASIC, GSM7_EXTENSION, MAX_SEGMENTS, UCS2, Segmentation,
    encoding_of, segment, septet_length, split,
)


def units(part: str, encoding: str) -> int:
    if encoding == GSM7:
        return sum(septet_length(c) for c in part)
    return len(part.encode("utf-16-le")) // 2


# --- the alphabet (3GPP TS 23.038) -----------------------------------------

def test_basic_table_has_128_entries_indexed_by_septet():
    assert len(GSM7_BASIC) == 128
    spot_checks = {0x00: "@", 0x01: "£", 0x02: "$", 0x03: "¥", 0x09: "Ç", 0x0A: "\n",
                   0x0D: "\r", 0x10: "Δ", 0x11: "_", 0x1C: "Æ", 0x1F: "É", 0x20: " ",
                   0x24: "¤", 0x40: "¡", 0x41: "A", 0x5B: "Ä", 0x5F: "§", 0x60: "¿",
                   0x61: "a", 0x7B: "ä", 0x7F: "à"}
    for code, char in spot_checks.items():
        assert GSM7_BASIC[code] == char


def test_extension_table_codes():
    assert GSM7_EXTENSION == {"€": 0x65, "{": 0x28, "}": 0x29, "[": 0x3C, "]": 0x3E,
                              "~": 0x3D, "\\": 0x2F, "|": 0x40, "^": 0x14, "\x0c": 0x0A}


@pytest.mark.parametrize("char, septets", [
    ("a", 1), ("@", 1), ("\n", 1), ("Ç", 1), ("€", 2), ("{", 2), ("^", 2), ("\x0c", 2),
])
def test_septet_length_is_1_for_basic_and_2_for_extension(char, septets):
    assert septet_length(char) == septets


@pytest.mark.parametrize("char", ["`", "\t", "ç", "’", "क", "😀", "\x1b"])
def test_septet_length_rejects_non_gsm7_characters(char):
    with pytest.raises(ValueError):
        septet_length(char)


@pytest.mark.parametrize("text, encoding", [
    ("Hello, world! 123", GSM7),
    ("Your OTP is 482913.\r\nDo not share it.", GSM7),
    ("@£$¥èéùìòÇØøÅåΔ_ΦΓΛΩΠΨΣΘΞÆæßÉ¤¡ÄÖÑÜ§¿äöñüà", GSM7),
    ("€", GSM7), ("{", GSM7), ("^", GSM7), ("Ç", GSM7), ("", GSM7),
    ("नमस्ते", UCS2), ("👍🏽", UCS2), ("`", UCS2), ("a\tb", UCS2), ("ç", UCS2),
    ("it’s", UCS2), ("“quoted”", UCS2),
])
def test_encoding_is_gsm7_only_when_every_character_is_in_the_alphabet(text, encoding):
    assert encoding_of(text) == encoding


@pytest.mark.parametrize("text, encoding, units_, segments", [
    ("नमस्ते", UCS2, 6, 1),
    ("👍🏽", UCS2, 4, 1),
    ("👨‍👩‍👧", UCS2, 8, 1),
    ("🇳🇵", UCS2, 4, 1),
    ("Hi €5", GSM7, 6, 1),
    ("", GSM7, 0, 1),
])
def test_segment_counts_septets_or_utf16_units(text, encoding, units_, segments):
    result = segment(text)
    assert result == Segmentation(encoding, tuple(split(text)), units_)
    assert result.segments == segments


# --- part boundaries (3GPP TS 23.040 concatenation) ------------------------

@pytest.mark.parametrize("text, segments", [
    ("a" * 160, 1), ("a" * 161, 2), ("a" * 306, 2), ("a" * 307, 3),
    ("a" * 918, 6), ("a" * 919, 7),
    ("क" * 70, 1), ("क" * 71, 2), ("क" * 134, 2), ("क" * 135, 3),
    ("क" * 402, 6), ("क" * 403, 7),
    ("€" * 80, 1), ("€" * 81, 2),
    ("€" * 459, 7),  # 918 septets, but only 76 '€' (152 septets) fit a part
])
def test_single_part_limit_then_153_septets_or_67_units_per_part(text, segments):
    assert len(split(text)) == segments
    assert segment(text).segments == segments


def test_max_segments_is_six():
    assert MAX_SEGMENTS == 6
    assert segment("a" * 918).segments == MAX_SEGMENTS


def test_empty_text_is_one_empty_part():
    assert split("") == [""]


def test_escape_pair_never_straddles_a_part_boundary():
    parts = split("a" * 152 + "€" + "a" * 10)
    assert parts == ["a" * 152, "€" + "a" * 10]
    assert [units(p, GSM7) for p in parts] == [152, 12]


def test_surrogate_pair_never_straddles_a_part_boundary():
    text = "a" * 66 + "😀" + "a" * 5  # 73 units, UCS-2 because of the emoji
    parts = split(text)
    assert parts == ["a" * 66, "😀" + "a" * 5]
    assert [units(p, UCS2) for p in parts] == [66, 7]


@pytest.mark.parametrize("text, encoding, capacity, sizes", [
    ("a" * 305, GSM7, 152, [152, 152, 1]),
    ("a" * 304, GSM7, 152, [152, 152]),
    ("a" * 160, GSM7, 152, [160]),  # single-part limit is unchanged
    ("क" * 133, UCS2, 66, [66, 66, 1]),
    ("क" * 70, UCS2, 66, [70]),
])
def test_part_capacity_for_16bit_concatenation_reference(text, encoding, capacity, sizes):
    parts = split(text, part_capacity=capacity)
    assert [units(p, encoding) for p in parts] == sizes


def test_explicit_encoding_overrides_detection():
    assert split("a" * 71, encoding=UCS2) == ["a" * 67, "a" * 4]


@pytest.mark.parametrize("kwargs", [{"encoding": GSM7}, {"encoding": "latin-1"}])
def test_split_rejects_text_that_cannot_use_the_encoding(kwargs):
    with pytest.raises(ValueError):
        split("ç" * 200, **kwargs)


# --- properties ------------------------------------------------------------

gsm_heavy = st.text(alphabet=st.sampled_from(
    [c for c in GSM7_BASIC if c != "\x1b"] + list(GSM7_EXTENSION)), max_size=1200)
mixed = st.text(alphabet=st.sampled_from(["a", "€", "{", "क", "😀", "👍", "🏽", "\u200d"]),
                max_size=600)
texts = st.one_of(st.text(max_size=600), gsm_heavy, mixed)


@given(texts)
def test_parts_join_back_to_the_text(text):
    assert "".join(split(text)) == text


@given(texts, st.booleans())
def test_every_part_fits_its_capacity(text, sixteen_bit):
    encoding = encoding_of(text)
    capacity = {GSM7: 152, UCS2: 66}[encoding] if sixteen_bit else None
    parts = split(text, part_capacity=capacity)
    if len(parts) == 1:
        assert units(parts[0], encoding) <= {GSM7: 160, UCS2: 70}[encoding]
    else:
        limit = capacity or {GSM7: 153, UCS2: 67}[encoding]
        assert all(0 < units(p, encoding) <= limit for p in parts)


@given(texts)
def test_no_part_starts_with_a_low_surrogate(text):
    for part in split(text):
        encoded = part.encode("utf-16-be")
        if encoded:
            assert not 0xDC00 <= int.from_bytes(encoded[:2], "big") <= 0xDFFF


@given(texts)
def test_segment_count_equals_number_of_split_parts(text):
    assert segment(text).segments == len(split(text))
    assert segment(text).units == sum(units(c, segment(text).encoding) for c in text)
