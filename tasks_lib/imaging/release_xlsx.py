"""The cell values of a release's spreadsheet (``.xlsx``, Office Open XML), read with the
standard library: medflows has no openpyxl, and a release's metadata table (PanTS's
``metadata.xlsx``) is all it needs from one.

Read as openpyxl's ``load_workbook(path).active`` gives them: the workbook's active sheet
(``bookViews/workbookView@activeTab``, default the first), rows in order, each a list of cell
values by column (``None`` where a row has no cell): shared and inline strings as text, booleans
as ``bool``, numbers as ``int`` when written without a fraction or exponent, else ``float``.
Each XML part is read within a size cap, and a document type declaration (entity expansion)
is refused.
"""

from __future__ import annotations

import io
import re
import zipfile
from pathlib import PurePosixPath
from xml.etree import ElementTree

from evaluators.core import InputDataError

MAIN = "{http://schemas.openxmlformats.org/spreadsheetml/2006/main}"
REL = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}"
PKG = "{http://schemas.openxmlformats.org/package/2006/relationships}"
MAX_PART_BYTES = 64 * 1024 * 1024
Cell = str | int | float | bool | None


def _part(book: zipfile.ZipFile, member: str, name: str) -> ElementTree.Element:
    try:
        info = book.getinfo(member)
    except KeyError:
        raise InputDataError(name, f"not a spreadsheet: it has no {member}") from None
    if info.file_size > MAX_PART_BYTES:
        raise InputDataError(name, f"{member} inflates to {info.file_size} bytes "
                                   f"(limit {MAX_PART_BYTES})")
    data = book.read(member)
    if b"<!DOCTYPE" in data[:4096].upper():
        raise InputDataError(name, f"{member} declares a document type (refused)")
    try:
        return ElementTree.fromstring(data)
    except ElementTree.ParseError as exc:
        raise InputDataError(name, f"{member} is not XML: {exc}") from None


def _text(node: ElementTree.Element) -> str:
    """The text of a string item: its ``t`` and its rich-text runs' ``r/t`` (phonetic hints,
    ``rPh``, left out)."""
    runs = [node.find(f"{MAIN}t"), *(r.find(f"{MAIN}t") for r in node.findall(f"{MAIN}r"))]
    return "".join(t.text or "" for t in runs if t is not None)


def _sheet_member(book: zipfile.ZipFile, name: str) -> str:
    wb = _part(book, "xl/workbook.xml", name)
    sheets = wb.findall(f"{MAIN}sheets/{MAIN}sheet")
    if not sheets:
        raise InputDataError(name, "the workbook has no sheet")
    view = wb.find(f"{MAIN}bookViews/{MAIN}workbookView")
    active = int(view.get("activeTab", "0")) if view is not None else 0
    rid = sheets[min(active, len(sheets) - 1)].get(f"{REL}id")
    rels = _part(book, "xl/_rels/workbook.xml.rels", name)
    target = next((r.get("Target", "") for r in rels.iter(f"{PKG}Relationship")
                   if r.get("Id") == rid), "")
    if not target:
        raise InputDataError(name, f"the active sheet ({rid}) has no part")
    return target.lstrip("/") if target.startswith("/") else str(PurePosixPath("xl") / target)


def _column(ref: str) -> int:
    letters = re.match(r"[A-Z]+", ref or "")
    n = 0
    for ch in letters.group(0) if letters else "":
        n = n * 26 + ord(ch) - 64
    return n - 1


def _value(cell: ElementTree.Element, strings: list[str]) -> Cell:
    kind, v = cell.get("t", "n"), cell.find(f"{MAIN}v")
    if kind == "inlineStr":
        inline = cell.find(f"{MAIN}is")
        return _text(inline) if inline is not None else ""
    if v is None or v.text is None:
        return None
    raw = v.text
    if kind == "s":
        return strings[int(raw)] if raw.isdigit() and int(raw) < len(strings) else None
    if kind == "b":
        return raw.strip() == "1"
    if kind in ("str", "e"):
        return raw
    try:
        return int(raw) if re.fullmatch(r"-?\d+", raw.strip()) else float(raw)
    except ValueError:
        return raw


def sheet_rows(data: bytes, name: str) -> list[list[Cell]]:
    """The active sheet's rows (``name`` names the file in errors)."""
    try:
        book = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile:
        raise InputDataError(name, "not an .xlsx spreadsheet (not a zip archive)") from None
    with book:
        strings = ([_text(si) for si in _part(book, "xl/sharedStrings.xml", name)
                    .iter(f"{MAIN}si")] if "xl/sharedStrings.xml" in book.namelist() else [])
        sheet = _part(book, _sheet_member(book, name), name)
    rows: list[list[Cell]] = []
    for row in sheet.iter(f"{MAIN}row"):
        number = int(row.get("r", str(len(rows) + 1)))  # 1-based; absent rows are empty
        if number < len(rows) + 1 or number > 10_000_000:
            raise InputDataError(name, f"row {number} is out of order")
        rows += [[] for _ in range(number - 1 - len(rows))]
        values: dict[int, Cell] = {}
        for k, cell in enumerate(row.iter(f"{MAIN}c")):
            ref = cell.get("r")
            values[_column(ref) if ref else k] = _value(cell, strings)
        width = max(values, default=-1) + 1
        rows.append([values.get(i) for i in range(width)])
    return rows
