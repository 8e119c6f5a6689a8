"""The standard-library ``.xlsx`` reader PanTS's ``metadata.xlsx`` is read with, on workbooks
written here in Office Open XML as spreadsheet programs write them (content types, package and
workbook relationships, a shared-strings table, rows with ``r`` references, sparse cells).
"""

from __future__ import annotations

import io
import zipfile
from xml.sax.saxutils import escape

import pytest

from evaluators.core import InputDataError
from tasks_lib.imaging.release_xlsx import sheet_rows

NS = 'xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"'
R_NS = 'xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"'


def _col(i: int) -> str:
    out = ""
    i += 1
    while i:
        i, rem = divmod(i - 1, 26)
        out = chr(65 + rem) + out
    return out


def _sheet(rows: list[list[object]], strings: list[str]) -> str:
    """A worksheet part: text as shared strings, bools as t="b", numbers as they print, None
    as no cell (sparse rows, as spreadsheet programs store them)."""
    out = []
    for n, row in enumerate(rows, start=1):
        cells = []
        for k, v in enumerate(row):
            ref = f"{_col(k)}{n}"
            if v is None:
                continue
            if isinstance(v, bool):
                cells.append(f'<c r="{ref}" t="b"><v>{int(v)}</v></c>')
            elif isinstance(v, int | float):
                cells.append(f'<c r="{ref}"><v>{v}</v></c>')
            else:
                strings.append(str(v))
                cells.append(f'<c r="{ref}" t="s"><v>{len(strings) - 1}</v></c>')
        out.append(f'<row r="{n}">{"".join(cells)}</row>')
    return (f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<worksheet {NS}>'
            f'<sheetData>{"".join(out)}</sheetData></worksheet>')


def xlsx_bytes(sheets: dict[str, list[list[object]]], active: int = 0) -> bytes:
    """An .xlsx workbook with these sheets (name → rows), ``active`` the active tab."""
    strings: list[str] = []
    parts = {f"xl/worksheets/sheet{i + 1}.xml": _sheet(rows, strings)
             for i, rows in enumerate(sheets.values())}
    names = "".join(f'<sheet name="{escape(n)}" sheetId="{i + 1}" r:id="rId{i + 1}"/>'
                    for i, n in enumerate(sheets))
    rels = "".join(f'<Relationship Id="rId{i + 1}" Type="http://schemas.openxmlformats.org/'
                   f'officeDocument/2006/relationships/worksheet" Target="worksheets/sheet'
                   f'{i + 1}.xml"/>' for i in range(len(sheets)))
    sst = "".join(f"<si><t>{escape(s)}</t></si>" for s in strings)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("[Content_Types].xml", '<?xml version="1.0"?><Types xmlns="http://schemas.'
                   'openxmlformats.org/package/2006/content-types"/>')
        z.writestr("_rels/.rels", '<?xml version="1.0"?><Relationships xmlns="http://schemas.'
                   'openxmlformats.org/package/2006/relationships"/>')
        z.writestr("xl/workbook.xml", f'<?xml version="1.0"?><workbook {NS} {R_NS}><bookViews>'
                   f'<workbookView activeTab="{active}"/></bookViews><sheets>{names}</sheets>'
                   "</workbook>")
        z.writestr("xl/_rels/workbook.xml.rels", '<?xml version="1.0"?><Relationships xmlns='
                   f'"http://schemas.openxmlformats.org/package/2006/relationships">{rels}'
                   "</Relationships>")
        z.writestr("xl/sharedStrings.xml", f'<?xml version="1.0"?><sst {NS}>{sst}</sst>')
        for name, xml in parts.items():
            z.writestr(name, xml)
    return buf.getvalue()


def test_active_sheet_values_are_read_as_openpyxl_gives_them() -> None:
    data = xlsx_bytes({"notes": [["ignored"]],
                       "cases": [["PanTS ID", "tumor?", "age", "note"],
                                 ["PanTS_00000001", 1, 63.5, None],
                                 ["PanTS_00000002", 0, 70, "a & b <c>"],
                                 ["PanTS_00000003", True, None, None]]}, active=1)
    assert sheet_rows(data, "metadata.xlsx") == [
        ["PanTS ID", "tumor?", "age", "note"], ["PanTS_00000001", 1, 63.5],
        ["PanTS_00000002", 0, 70, "a & b <c>"], ["PanTS_00000003", True]]
    first = sheet_rows(xlsx_bytes({"a": [[None, "x"]], "b": [["y"]]}), "m.xlsx")
    assert first == [[None, "x"]]


def test_what_is_not_a_spreadsheet_is_refused_naming_the_file() -> None:
    with pytest.raises(InputDataError, match=r"^metadata.xlsx: not an .xlsx spreadsheet"):
        sheet_rows(b"PK not really", "metadata.xlsx")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("xl/workbook.xml", '<!DOCTYPE lol [<!ENTITY a "aaaa">]><workbook/>')
    with pytest.raises(InputDataError, match=r"^metadata.xlsx: xl/workbook.xml declares a "
                                             r"document type \(refused\)$"):
        sheet_rows(buf.getvalue(), "metadata.xlsx")
