"""Which operator a SIM and a recipient are on (domain/operators.py)."""
import phonenumbers
import pytest
from phonenumbers import carrier

from sandesh.domain.operators import NCELL, NTC, PREFIX, SMART, UTL, of_imsi, of_number

# phonenumbers' carrier names for Nepal, as our operators
_CARRIERS = {"Nepal Telecom": NTC, "NDCL": NTC, "NCell": NCELL, "Smart Telecom": SMART, "UTL": UTL,
             "NSTPL": "hello", "STM Telecom": "stm"}


@pytest.mark.parametrize("prefix", [f"9{d:02d}" for d in range(60, 90)])
def test_every_prefix_agrees_with_the_carrier_data_of_phonenumbers(prefix):
    number = phonenumbers.parse(f"+977{prefix}1234567")
    name = carrier.name_for_number(number, "en")
    expected = _CARRIERS[name] if name else None
    assert of_number(f"977{prefix}1234567") == expected
    assert (prefix in PREFIX) == bool(name)


@pytest.mark.parametrize("imsi, operator", [("429011234567890", NTC), ("429020000000001", NCELL),
                                            ("429030000000001", UTL), ("429040000000001", SMART),
                                            ("429990000000001", None), ("404450000000001", None), (None, None)])
def test_a_sims_operator_comes_from_the_mnc_of_its_imsi(imsi, operator):
    assert of_imsi(imsi) == operator
