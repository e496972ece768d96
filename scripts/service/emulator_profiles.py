"""How real modem families differ from 3GPP TS 27.005/27.007, for the emulator to play
(`sandesh emulator --profile NAME`; docs/operations.md, "Modems").

Each profile names the public source its behaviour follows: gammu (libgammu/gsmphones.c's
feature flags per model, tests/at-*/*.dump replies of named devices), python-gsmmodem
(test/fakemodems.py reply tables per device), ModemManager's vendor plugins, and the vendors'
AT command manuals.  Where no source showed a detail, the profile keeps the 3GPP behaviour and
`assumed` says so; nothing here is copied code, only the facts.
"""
from __future__ import annotations

from dataclasses import dataclass, field

BROAD_CNMI = "+CNMI: (0-3),(0-3),(0-3),(0-2),(0,1)"
BROAD_CPMS = '+CPMS: ("SM","ME","MT"),("SM","ME","MT"),("SM","ME","MT")'


@dataclass(frozen=True)
class Profile:
    name: str
    devices: str                       # the family it plays
    sources: tuple[str, ...]
    manufacturer: str = "Sandesh"      # AT+CGMI, AT+CGMM, AT+CGMR (None: the command is refused)
    model: str = "EMU25"
    firmware: str | None = "EMU25-1.0"
    refusal: str = "ERROR"             # the final result of a command the device does not take
    unsupported: frozenset[str] = frozenset()  # commands it refuses, as keys of VirtualModem.COMMANDS
    cpin_no_ok: bool = False           # +CPIN: <state> with no final result after it
    cnmi_test: str = BROAD_CNMI        # the answer to AT+CNMI=?; values outside it are refused
    cnmi_refusal: str = "+CMS ERROR: 303"
    cnmi_refused_ds: frozenset[int] = frozenset()  # <ds> values it lists in AT+CNMI=? but refuses
    cpms_test: str = BROAD_CPMS        # the answer to AT+CPMS=?; stores outside it are refused
    cpms_params: int = 3               # at most this many stores in AT+CPMS=
    first_index: int = 1               # the lowest index of the message store
    report_store: str = "SM"           # where a stored status report goes (+CDSI: "<store>",<index>)
    iccid: str = "+CCID"               # the vendor command that reads the ICCID ("" for none) ...
    iccid_answer: str = "+CCID: {iccid}"  # ... and how it answers
    boot_lines: tuple[str, ...] = ()   # printed at power-up and after AT+CFUN=1,1
    busy_seconds: float = 0.0          # after power-up, SIM and SMS commands answer `busy_answer`
    busy_answer: str = "+CME ERROR: 14"
    sms_refused_while_busy: bool = False  # while busy, SMS commands answer a plain ERROR and SIM ones work (SIMCom)
    noise: tuple[str, ...] = ()        # unsolicited lines it prints while idle and inside exchanges
    ussd_packed: bool = False          # USSD strings packed 7-bit, in hex (gammu F_ENCODED_USSD)
    cmgs_seconds: float = 0.0          # the network's time to accept a part
    assumed: tuple[str, ...] = field(default=())


PROFILES: dict[str, Profile] = {p.name: p for p in (
    Profile(
        "3gpp", "a device that answers as 3GPP TS 27.005/27.007 say",
        ("3GPP TS 27.005 v17, TS 27.007 v17",),
        first_index=0),
    Profile(
        "huawei", "Huawei E173, E1550, E1752, E3372 in stick mode",
        ("gammu libgammu/gsmphones.c: Huawei E173/E1552/E1550/E3372/K3715 carry F_SMS_LOCATION_0 and F_ENCODED_USSD",
         "python-gsmmodem test/fakemodems.py HuaweiE1752: AT+CGMI huawei, AT+CGMM E1752, AT+CGMR 11.126.13.00.00, "
         "AT+CPMS=? with ME/MT/SM/SR, COMMAND NOT SUPPORT for commands it lacks",
         "Huawei EM770W AT Command Interface Specification, Issue 18, section 1.3: COMMAND NOT SUPPORT, "
         "TOO MANY PARAMETERS",
         "gammu libgammu/protocol/at/at.c: ^RSSI, ^BOOT, ^MODE, ^SRVST, ^DSFLOWRPT lines; issue #490: +CDSI \"SR\"",
         "ModemManager plugins/huawei/mm-sim-huawei.c: AT^ICCID?"),
        manufacturer="huawei", model="E1752", firmware="11.126.13.00.00",
        refusal="COMMAND NOT SUPPORT", unsupported=frozenset({"+CCID", "+CEREG?", "+CEREG=…"}),
        cpms_test='+CPMS: ("ME","MT","SM","SR"),("ME","MT","SM","SR"),("ME","MT","SM","SR")',
        first_index=0, report_store="SR", iccid="^ICCID?", iccid_answer="^ICCID: {iccid}",
        noise=("^RSSI:18", "^MODE:5,4", "^SRVST:2", "^BOOT:27710117,0,0,0,75",
               "^DSFLOWRPT:000004EA,00000000,00000000,0000000000000000,0000000000000000,0003E800,0003E800"),
        ussd_packed=True, cmgs_seconds=2.0,
        assumed=("AT+CNMI=? answer (no capture names a Huawei device): the 3GPP ranges",)),
    Profile(
        "zte", "ZTE MF-series sticks (MF626, MF190, K3565-Z)",
        ("python-gsmmodem test/fakemodems.py ZteK3565Z: AT+CGMI ZTE INCORPORATED, AT+CGMM K3565-Z, "
         "AT+CGMR BD_P673A2V1.0.0B09, AT+CPMS=? with ME/MT/SM/SR",
         "gammu issue #209 (MF626): +CDSI: \"SR\",50 in the middle of another command's answer",
         "ModemManager plugins/zte/mm-common-zte.c: +ZUSIMR, +ZDONR, +ZPASR unsolicited lines",
         "ModemManager src/mm-broadband-modem.c, the AT+CNMI sequence: many Qualcomm-based devices refuse "
         "<ds> 1 though AT+CNMI=? lists it, and take 2"),
        manufacturer="ZTE INCORPORATED", model="K3565-Z", firmware="BD_P673A2V1.0.0B09",
        cnmi_refused_ds=frozenset({1}),
        cpms_test='+CPMS: ("ME","MT","SM","SR"),("ME","MT","SM","SR"),("ME","MT","SM","SR")',
        report_store="SR", iccid="", unsupported=frozenset({"+CCID"}),
        boot_lines=("+ZUSIMR:2", "+ZUSIMR:2", "+ZDONR: \"Nepal Telecom\",429,01,\"CS_PS\",\"ROAM_OFF\""),
        noise=("+ZPASR: \"UMTS\"", "+ZUSIMR:2"), cmgs_seconds=1.5,
        assumed=("AT+CNMI=? answer: the 3GPP ranges", "the ICCID only through AT+CRSM (no AT+CCID)")),
    Profile(
        "simcom", "SIMCom SIM800, SIM900, SIM7600",
        ("SIMCom SIM800 Series AT Command Manual V1.09, 4.2.8: AT+CNMI <ds> 0 or 1 only, <bm> 0 or 2",
         "SIM800L AT+CPMS=? with SM, ME, SM_P, ME_P, MT (gammu tests/at-cpms/alcatel-s320.dump has the same list)",
         "Seeed-Studio GPRS_SIM900 issue #39: SMS commands answer ERROR until \"SMS Ready\"; "
         "+CPIN: READY, Call Ready, SMS Ready after power-up",
         "TinyGSM src/TinyGsmClientSIM800.h: AT+CCID answers the digits alone"),
        manufacturer="SIMCOM_Ltd", model="SIMCOM_SIM800L", firmware="Revision:1418B05SIM800L24",
        cnmi_test="+CNMI: (0-3),(0-3),(0,2),(0,1),(0,1)",
        cpms_test='+CPMS: ("SM","ME","SM_P","ME_P","MT"),("SM","ME","SM_P","ME_P","MT"),("SM","ME","SM_P","ME_P","MT")',
        iccid_answer="{iccid}", boot_lines=("+CPIN: READY", "Call Ready", "SMS Ready"),
        busy_seconds=1.5, sms_refused_while_busy=True, cmgs_seconds=2.5,
        assumed=("AT+CGMI/CGMM/CGMR strings",)),
    Profile(
        "quectel", "Quectel EC25, EG25, M35",
        ("Quectel EC25/EG25-G AT Commands Manual: power-up lines RDY, +CFUN: 1, +CPIN: READY, +QUSIM: 1, "
         "+QIND: SMS DONE, +QIND: PB DONE; AT+QCCID",
         "EC25 firmware name EC25EFAR06A01M4G (Quectel release notes)",
         "python-gsmmodem gsmmodem/modem.py and the notes on TS 27.007 9.2: +CME ERROR: 14 (SIM busy) "
         "for seconds after power-up"),
        manufacturer="Quectel", model="EC25", firmware="EC25EFAR06A01M4G", first_index=0,
        iccid="+QCCID", iccid_answer="+QCCID: {iccid}F",
        boot_lines=("RDY", "+CFUN: 1", "+CPIN: READY", "+QUSIM: 1", "+QIND: SMS DONE", "+QIND: PB DONE"),
        busy_seconds=1.5, cmgs_seconds=1.0,
        assumed=("AT+CNMI=? and AT+CPMS=? answers: the 3GPP ranges",)),
    Profile(
        "cinterion", "Cinterion and Siemens modules (MC35i, MC55, MC75i, BGS2)",
        ("gammu pull request #1207 (MC75i log): AT+CNMI=? answers (0-3),(0,1),(0,2,3),(0,2),(1); "
         "AT+CNMI=2,1,0,2,1 is taken; AT+CPMS=? (\"ME\",\"SM\",\"MT\"),(\"ME\",\"SM\",\"MT\"),(\"SM\",\"MT\")",
         "gammu libgammu/phone/at/atgen.c, the Siemens +CMS ERROR codes: 538 invalid parameter, "
         "515 please wait, init in progress",
         "ModemManager plugins/cinterion: ^SYSSTART after power-up; AT^SCID answers ^SCID: <ICCID>"),
        manufacturer="Cinterion", model="MC75i", firmware="REVISION 04.004",
        cnmi_test="+CNMI: (0-3),(0,1),(0,2,3),(0,2),(1)", cnmi_refusal="+CMS ERROR: 538",
        cpms_test='+CPMS: ("ME","SM","MT"),("ME","SM","MT"),("SM","MT")',
        iccid="^SCID", iccid_answer="^SCID: {iccid}", boot_lines=("^SYSSTART",),
        busy_seconds=1.0, busy_answer="+CME ERROR: 515", cmgs_seconds=1.5,
        assumed=("AT+CGMR string",)),
    Profile(
        "wavecom", "Wavecom and Sierra (Fastrack M1306B, Q2303)",
        ("python-gsmmodem test/fakemodems.py WavecomMultiband900E1800: AT+CGMI \" WAVECOM MODEM\", "
         "AT+CGMM \" MULTIBAND  900E  1800\", AT+CGMR ERROR, +CPIN: READY without OK, "
         "AT+CPMS=? ((\"SM\",\"BM\",\"SR\"),(\"SM\")), three stores refused",
         "gammu libgammu/gsmphones.c: MULTIBAND  900E  1800 carries F_CPIN_NO_OK",
         "Wavecom WM_DEV_OAT_UGD_049, 2.5: +CME ERROR: 515 while the SIM initialises; +WIND: 4 when ready"),
        manufacturer=" WAVECOM MODEM", model=" MULTIBAND  900E  1800 ", firmware=None, cpin_no_ok=True,
        cpms_test='+CPMS: (("SM","BM","SR"),("SM"))', cpms_params=2,
        boot_lines=("+WIND: 1", "+WIND: 7", "+WIND: 4"), busy_seconds=1.0, busy_answer="+CME ERROR: 515",
        iccid_answer='+CCID: "{iccid}F"', cmgs_seconds=2.0,
        assumed=("AT+CNMI=? answer: the 3GPP ranges", "the quoted, F-padded +CCID answer")),
    Profile(
        "telit", "Telit GL865, HE910, LE910",
        ("Telit AT Commands Reference Guide 80000ST10025a rev. 5, AT+CNMI: the test command answers "
         "(0-2),(0-3),(0,2),(0-2),(0,1); stored reports are +CDSI: \"SM\",<index>",
         "ModemManager plugins/telit: #QSS unsolicited SIM status; Telit AT#CCID"),
        manufacturer="Telit", model="GL865-DUAL V3", firmware="16.01.152",
        cnmi_test="+CNMI: (0-2),(0-3),(0,2),(0-2),(0,1)", iccid="#CCID", iccid_answer="#CCID: {iccid}",
        boot_lines=("#QSS: 1",), cmgs_seconds=1.5,
        assumed=("AT+CGMM/CGMR strings",)),
)}
