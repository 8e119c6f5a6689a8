"""A generated corpus of malformed submissions, every track (issue 14).

Each :class:`Malformed` case turns a good submission folder (a perfect baseline) into a hostile
or faulty one by changing ONE thing: one case's output file, one row of a table, one extra entry,
one line of ``answers.jsonl`` or one challenge file. The tests score it and expect the named case
to be invalid with a reason that names the file and the rule, the other cases still scored, no
traceback and bounded memory. ``heavy`` cases (bombs) are also scored in a subprocess whose peak
RSS is measured.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tasks_lib.imaging import codecs
from tasks_lib.imaging.types import PoolManifest

Apply = Callable[[Path, PoolManifest], None]
"""Mutate the submission folder (first argument) of a pool with this manifest."""

SEG, LDCT, SR = "brain-tissue-seg", "ldct-denoise", "mri-superres"
DET, VQA, REP = "brain-lesion-det", "brain-lesion-vqa", "brain-lesion-report"
IMAGING = [SEG, LDCT, SR, DET, VQA, REP]
GiB = 1024 ** 3
ISSUE_CASES = ("ldct-denoise-npy-header-728TiB", "seg-nifti-header-huge", "gzip-bomb",
               "det-400-digit", "det-5000-digit-score", "det-int-score-too-big", "det-100000",
               "vqa-10MB-field", "report-10MB-field", "det-extra-non-utf8-name",
               "seg-extra-4GiB-sparse", "ldct-denoise-npy-1e308", "det-bool-coordinate",
               "det-bool-label", "ldct-denoise-npy-text-file", "det-symlinked-folder",
               "ldct-denoise-npy-pickle", "vqa-extra-columns", "vqa-extra-field-in-row",
               "vqa-unterminated-quote")
"""Name fragments of the cases issues 14 and 21 report."""


@dataclass(frozen=True)
class Malformed:
    """One malformed submission.

    Attributes:
        name: Test id.
        task: Imaging task id, ``qa`` or a challenge id.
        rule: Text the reason must hold (the rule's name, e.g. ``array_size``).
        file: File the reason must name (``""``: the case's own output file).
        apply: Turns the good folder into the bad one.
        scope: ``case`` (the target case alone is invalid), ``table`` (every case of the shared
            table is invalid), ``extra`` (an extra entry is flagged; every case stays valid),
            ``folder`` (every case invalid), ``submission`` (challenge: the whole submission).
        target: Index of the case made invalid (``case`` scope).
        heavy: A bomb: also scored in a subprocess whose peak RSS must stay < 1 GiB.
    """

    @property
    def from_issue(self) -> bool:
        """One of the crashes, unbounded reads or silent results issue 14 lists (these run in
        every test session; the rest of the corpus is marked slow)."""
        return any(k in self.name for k in ISSUE_CASES)

    name: str
    task: str
    rule: str
    apply: Apply
    scope: str = "case"
    file: str = ""
    target: int = 0
    heavy: bool = False


# --- payload builders ---------------------------------------------------------------------------

def out(sub: Path, m: PoolManifest, i: int = 0) -> Path:
    """The output file of case ``i``."""
    return sub / m.cases[i].output


def write(data: bytes | Callable[[PoolManifest], bytes], i: int = 0) -> Apply:
    """Replace case ``i``'s output with ``data`` (or ``data(manifest)``)."""
    def apply(sub: Path, m: PoolManifest) -> None:
        p = out(sub, m, i)
        p.unlink(missing_ok=True)
        p.write_bytes(data(m) if callable(data) else data)
    return apply


def npy_header(shape: tuple[int, ...], descr: str = "<f8", version: int = 1) -> bytes:
    """An NPY file that is only a header declaring ``shape`` (no data): ~130 bytes."""
    header = repr({"descr": descr, "fortran_order": False, "shape": shape}).encode("latin1")
    pad = 64 - (10 + len(header) + 1) % 64
    header += b" " * pad + b"\n"
    if version == 1:
        return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header
    return b"\x93NUMPY\x02\x00" + struct.pack("<I", len(header) + 2) + header + b"  "


def nifti_header_only(shape: tuple[int, ...], gz: bool = True) -> bytes:
    """A NIfTI-1 header declaring ``shape`` of float64 and no data (~350 bytes, ~130 gzipped)."""
    import nibabel as nib

    hdr = nib.Nifti1Header()
    hdr.set_data_shape(shape)
    hdr.set_data_dtype(np.float64)
    raw = hdr.binaryblock + b"\x00" * 4
    return gzip.compress(raw, mtime=0) if gz else raw


def nifti_gzip_bomb(shape: list[int], inflated: int) -> bytes:
    """A gzip NIfTI whose header declares the case grid but which inflates to ``inflated``
    bytes: a header member plus many members of compressed zeros (~1 KB per MiB)."""
    import nibabel as nib

    hdr = nib.Nifti1Header()
    hdr.set_data_shape(shape)
    hdr.set_data_dtype(np.uint8)
    first = gzip.compress(hdr.binaryblock + b"\x00" * 4, mtime=0)
    block = 64 * 1024 * 1024
    member = gzip.compress(bytes(block), compresslevel=9, mtime=0)
    return first + member * (inflated // block)


def nifti_far_offset(shape: list[int]) -> bytes:
    """A gzip NIfTI header of the case grid whose data would start 1 GB into the file."""
    import nibabel as nib

    hdr = nib.Nifti1Header()
    hdr.set_data_shape(shape)
    hdr.set_data_dtype(np.uint8)
    hdr["vox_offset"] = 10 ** 9
    return gzip.compress(hdr.binaryblock + b"\x00" * 4, mtime=0)


def nifti(arr: np.ndarray) -> bytes:
    """A gzip NIfTI of ``arr`` (4 mm spacing)."""
    return codecs.nifti_bytes(arr, (4.0,) * min(arr.ndim, 3))


def nifti_typed(arr: np.ndarray) -> bytes:
    """A gzip NIfTI of ``arr`` in its own dtype (int64 included)."""
    import nibabel as nib

    img = nib.Nifti1Image(arr, np.eye(4), dtype=arr.dtype)
    return gzip.compress(img.to_bytes(), mtime=0)


def npy(arr: np.ndarray) -> bytes:
    """NPY bytes of ``arr`` (pickles allowed here, so object arrays can be planted)."""
    buf = io.BytesIO()
    np.save(buf, arr, allow_pickle=True)
    return buf.getvalue()


def grid(m: PoolManifest, i: int = 0) -> tuple[int, ...]:
    """The case grid of case ``i``."""
    return tuple(m.cases[i].shape)


def sparse(size: int, i: int = 0) -> Apply:
    """Case ``i``'s output becomes a sparse file of ``size`` bytes (no disk used)."""
    def apply(sub: Path, m: PoolManifest) -> None:
        p = out(sub, m, i)
        p.unlink(missing_ok=True)
        with p.open("wb") as f:
            f.truncate(size)
    return apply


def symlink_output(sub: Path, m: PoolManifest) -> None:
    """Case 0's output becomes a symlink to a real file elsewhere."""
    target = sub.parent / f"{sub.name}-elsewhere"
    target.write_bytes(out(sub, m).read_bytes())
    out(sub, m).unlink()
    out(sub, m).symlink_to(target)


def directory_output(sub: Path, m: PoolManifest) -> None:
    """Case 0's output becomes a directory."""
    out(sub, m).unlink()
    out(sub, m).mkdir()


def boxes(obj: object) -> bytes:
    """A detection JSON document."""
    return json.dumps(obj).encode()


def box_doc(**changes: object) -> bytes:
    """One good box with some fields replaced."""
    doc: dict[str, object] = {"boxes": [[10.0, 10.0, 20.0, 20.0]], "scores": [0.9],
                              "labels": [1]}
    doc.update(changes)
    return boxes(doc)


def raw_box_doc(boxes_text: str = "[[10, 10, 20, 20]]", scores: str = "[0.9]",
                labels: str = "[1]") -> bytes:
    """A detection JSON written by hand (for literals json.dumps cannot produce)."""
    return f'{{"boxes": {boxes_text}, "scores": {scores}, "labels": {labels}}}'.encode()


def edit_table(key: str, value: str, text: Callable[[str], str] | None = None,
               extra_rows: list[tuple[str, str]] | None = None, dup: bool = False,
               target: int = 0) -> Apply:
    """Rewrite the shared CSV table: case ``target``'s value through ``text``, extra rows
    appended, or its row duplicated."""
    def apply(sub: Path, m: PoolManifest) -> None:
        p = sub / m.cases[0].output
        rows = [(r[key], r[value]) for r in codecs.csv_rows(p.read_bytes())]
        cid = m.cases[target].case_id
        if text is not None:
            rows = [(k, text(v) if k == cid else v) for k, v in rows]
        if dup:
            rows.append(next(r for r in rows if r[0] == cid))
        rows += extra_rows or []
        p.write_bytes(codecs.csv_bytes([key, value], rows))
    return apply


def key_only_row(target: int = 0) -> Apply:
    """Case ``target``'s row of the shared table keeps its key and loses its value column."""
    def apply(sub: Path, m: PoolManifest) -> None:
        p = sub / m.cases[0].output
        cid = m.cases[target].case_id
        lines = [cid if line.split(",", 1)[0] == cid else line
                 for line in p.read_text().splitlines()]
        p.write_text("\n".join(lines) + "\n")
    return apply


def table_bytes(data: bytes | Callable[[bytes], bytes]) -> Apply:
    """Replace the whole shared table file."""
    def apply(sub: Path, m: PoolManifest) -> None:
        p = sub / m.cases[0].output
        p.write_bytes(data(p.read_bytes()) if callable(data) else data)
    return apply


def extra(kind: str) -> Apply:
    """Plant one extra entry (never opened by inspection)."""
    def apply(sub: Path, m: PoolManifest) -> None:
        if kind == "non_utf8_name":
            with open(os.path.join(os.fsencode(sub), b"notes-\xff\xfe.txt"), "wb") as f:
                f.write(b"hello")
        elif kind == "many_files":
            for k in range(1_205):
                (sub / f"junk-{k:05d}.txt").write_bytes(b"")
        elif kind == "huge_sparse":
            with (sub / "huge.bin").open("wb") as f:
                f.truncate(4 * GiB)
        elif kind == "symlink_out":
            (sub / "passwd").symlink_to("/etc/passwd")
        elif kind == "fifo":
            os.mkfifo(sub / "pipe")
        elif kind == "directory":
            (sub / "nested" / "deeper").mkdir(parents=True)
    return apply


def symlinked_folder(sub: Path, m: PoolManifest) -> None:
    """The submission folder itself becomes a symlink to a copy of it."""
    real = sub.parent / f"{sub.name}-real"
    sub.rename(real)
    sub.symlink_to(real, target_is_directory=True)


# --- the corpus ---------------------------------------------------------------------------------

def _npy_cases(task: str) -> list[Malformed]:
    t = task

    def g(m: PoolManifest) -> tuple[int, ...]:
        return grid(m)

    return [
        Malformed(f"{t}-npy-header-728TiB", t, "array_size",
                  write(npy_header((2 ** 22, 2 ** 22, 2 ** 22 // 8))), heavy=True),
        Malformed(f"{t}-npy-header-huge-v2", t, "array_size",
                  write(npy_header((10 ** 6, 10 ** 6), version=2))),
        Malformed(f"{t}-npy-header-16x-grid", t, "array_size",
                  write(lambda m: npy_header((*g(m), 16)))),
        Malformed(f"{t}-npy-header-int64-overflow", t, "array_size",
                  write(npy_header((2 ** 62, 2 ** 62)))),
        Malformed(f"{t}-npy-negative-dim", t, "array_size",
                  write(npy_header((-1, 96)))),
        Malformed(f"{t}-npy-text-file", t, "not an NPY file", write(b"hello, I am text\n")),
        Malformed(f"{t}-npy-empty", t, "not an NPY file", write(b"")),
        Malformed(f"{t}-npy-pickle", t, "pickled data",
                  write(npy(np.array([{"a": 1}, None], dtype=object)))),
        Malformed(f"{t}-npy-truncated", t, "truncated",
                  write(lambda m: npy(np.zeros(g(m), np.float32))[:-100])),
        Malformed(f"{t}-npy-bad-version", t, "npy_format",
                  write(b"\x93NUMPY\x09\x00" + b"x" * 120)),
        Malformed(f"{t}-npy-garbage-header", t, "npy_format",
                  write(b"\x93NUMPY\x01\x00\x10\x00{'descr': nope}\n")),
        Malformed(f"{t}-npy-gzipped", t, "not an NPY file",
                  write(lambda m: gzip.compress(npy(np.zeros(g(m), np.float32))))),
        Malformed(f"{t}-npy-1e308", t, "intensity_ceiling",
                  write(lambda m: npy(np.full(g(m), 1e308)))),
        Malformed(f"{t}-npy-plus-minus-1e308", t, "intensity_floor",
                  write(lambda m: npy(np.where(np.indices(g(m)).sum(0) % 2, 1e308, -1e308)))),
        Malformed(f"{t}-npy-nan", t, "all_finite",
                  write(lambda m: npy(np.full(g(m), np.nan, np.float32)))),
        Malformed(f"{t}-npy-inf", t, "all_finite",
                  write(lambda m: npy(np.full(g(m), np.inf, np.float32)))),
        Malformed(f"{t}-npy-int-dtype", t, "float_dtype",
                  write(lambda m: npy(np.zeros(g(m), np.int16)))),
        Malformed(f"{t}-npy-complex", t, "float_dtype",
                  write(lambda m: npy(np.zeros(g(m), np.complex64)))),
        Malformed(f"{t}-npy-bool", t, "float_dtype",
                  write(lambda m: npy(np.zeros(g(m), bool)))),
        Malformed(f"{t}-npy-structured", t, "float_dtype",
                  write(lambda m: npy(np.zeros(g(m), [("a", "<f4"), ("b", "<f4")])))),
        Malformed(f"{t}-npy-wrong-shape", t, "shape_matches_manifest",
                  write(npy(np.zeros((4, 4), np.float32)))),
        Malformed(f"{t}-npy-extra-axis", t, "shape_matches_manifest",
                  write(lambda m: npy(np.zeros((*g(m), 3), np.float32)))),
        Malformed(f"{t}-npy-scalar", t, "shape_matches_manifest",
                  write(npy(np.float32(0.5)))),
        Malformed(f"{t}-npy-257MiB-sparse", t, "file_size", sparse(257 * 1024 * 1024)),
        Malformed(f"{t}-npy-symlink", t, "files_safe", symlink_output),
        Malformed(f"{t}-npy-directory", t, "files_safe", directory_output),
    ]


def _nifti_cases() -> list[Malformed]:
    t = SEG

    def g(m: PoolManifest) -> tuple[int, ...]:
        return grid(m)

    return [
        Malformed("seg-nifti-header-huge", t, "array_size",
                  write(nifti_header_only((30000, 30000, 30000))), heavy=True),
        Malformed("seg-nifti-header-huge-plain", t, "array_size",
                  write(nifti_header_only((30000, 30000, 30000), gz=False))),
        Malformed("seg-nifti-header-16x-grid", t, "array_size",
                  write(lambda m: nifti_header_only((*g(m), 16)))),
        Malformed("seg-nifti-gzip-bomb-2.4GB", t, "decompressed_size",
                  write(lambda m: nifti_gzip_bomb(list(g(m)), 2_400 * 1024 * 1024)), heavy=True),
        Malformed("seg-nifti-vox-offset-1GB", t, "nifti_format",
                  write(lambda m: nifti_far_offset(list(g(m))))),
        Malformed("seg-nifti-truncated-gzip", t, "gzip_format",
                  write(lambda m: nifti(np.zeros(g(m), np.uint8))[:200])),
        Malformed("seg-nifti-corrupt-gzip", t, "gzip_format",
                  write(lambda m: (lambda b: b[:30] + bytes(64) + b[94:])(
                      nifti(np.ones(g(m), np.uint8))))),
        Malformed("seg-nifti-text", t, "nifti_format", write(b"not a nifti at all")),
        Malformed("seg-nifti-empty", t, "nifti_format", write(b"")),
        Malformed("seg-nifti-gzip-of-nothing", t, "nifti_format", write(gzip.compress(b""))),
        Malformed("seg-nifti-is-npy", t, "nifti_format",
                  write(lambda m: npy(np.zeros(g(m), np.uint8)))),
        Malformed("seg-nifti-data-truncated", t, "nifti_format",
                  write(lambda m: gzip.compress(gzip.decompress(
                      nifti(np.ones(g(m), np.uint8)))[:-1000]))),
        Malformed("seg-nifti-nan-labels", t, "all_finite",
                  write(lambda m: nifti(np.full(g(m), np.nan, np.float32)))),
        Malformed("seg-nifti-float-labels", t, "integer_dtype",
                  write(lambda m: nifti(np.ones(g(m), np.float32)))),
        Malformed("seg-nifti-1e308", t, "integer_dtype",
                  write(lambda m: nifti(np.full(g(m), 1e308)))),
        Malformed("seg-nifti-unknown-label", t, "labels_in_task_set",
                  write(lambda m: nifti(np.full(g(m), 7, np.uint8)))),
        Malformed("seg-nifti-negative-label", t, "labels_in_task_set",
                  write(lambda m: nifti(np.full(g(m), -1, np.int16)))),
        Malformed("seg-nifti-int64-huge-label", t, "labels_in_task_set",
                  write(lambda m: nifti_typed(np.full(g(m), 2 ** 62, np.int64)))),
        Malformed("seg-nifti-wrong-shape", t, "shape_matches_manifest",
                  write(nifti(np.zeros((4, 4, 4), np.uint8)))),
        Malformed("seg-nifti-4d", t, "shape_matches_manifest",
                  write(lambda m: nifti(np.zeros((*g(m), 2), np.uint8)))),
        Malformed("seg-nifti-257MiB-sparse", t, "file_size", sparse(257 * 1024 * 1024)),
        Malformed("seg-nifti-symlink", t, "files_safe", symlink_output),
        Malformed("seg-nifti-directory", t, "files_safe", directory_output),
    ]


def _detection_cases() -> list[Malformed]:
    t = DET
    deep = b'{"boxes": ' + b"[" * 100_000 + b"]" * 100_000 + b', "scores": [], "labels": []}'
    return [
        Malformed("det-400-digit-score", t, "json_number",
                  write(raw_box_doc(scores="[" + "9" * 400 + "]"))),
        Malformed("det-5000-digit-score", t, "json_number",
                  write(raw_box_doc(scores="[" + "1" * 5000 + "]")), heavy=True),
        Malformed("det-5000-digit-coordinate", t, "json_number",
                  write(raw_box_doc(boxes_text="[[1, 2, " + "3" * 5000 + ", 4]]"))),
        Malformed("det-int-score-too-big-for-float", t, "json_number",
                  write(raw_box_doc(scores="[1" + "0" * 320 + "]"))),
        Malformed("det-33-digit-label", t, "json_number",
                  write(raw_box_doc(labels="[1" + "0" * 32 + "]"))),
        Malformed("det-100000-deep", t, "json_depth", write(deep), heavy=True),
        Malformed("det-20-deep", t, "json_depth",
                  write(raw_box_doc(scores="[" * 20 + "]" * 20))),
        Malformed("det-bool-coordinate", t, "boxes_well_formed",
                  write(box_doc(boxes=[[True, 10, 20, 20]]))),
        Malformed("det-bool-score", t, "scores_finite", write(box_doc(scores=[True]))),
        Malformed("det-bool-label", t, "labels_known", write(box_doc(labels=[True]))),
        Malformed("det-string-coordinate", t, "boxes_well_formed",
                  write(box_doc(boxes=[["10", 10, 20, 20]]))),
        Malformed("det-string-score", t, "scores_finite", write(box_doc(scores=["0.9"]))),
        Malformed("det-null-score", t, "scores_finite", write(box_doc(scores=[None]))),
        Malformed("det-nan-score", t, "scores_finite", write(raw_box_doc(scores="[NaN]"))),
        Malformed("det-1e400-score", t, "scores_finite", write(raw_box_doc(scores="[1e400]"))),
        Malformed("det-infinity-coordinate", t, "boxes_well_formed",
                  write(raw_box_doc(boxes_text="[[1, 2, Infinity, 4]]"))),
        Malformed("det-minus-infinity-coordinate", t, "boxes_well_formed",
                  write(raw_box_doc(boxes_text="[[-Infinity, 2, 3, 4]]"))),
        Malformed("det-nested-coordinate", t, "boxes_well_formed",
                  write(box_doc(boxes=[[[10], 10, 20, 20]]))),
        Malformed("det-three-coordinates", t, "boxes_well_formed",
                  write(box_doc(boxes=[[10, 10, 20]]))),
        Malformed("det-inverted-box", t, "boxes_ordered",
                  write(box_doc(boxes=[[20, 20, 10, 10]]))),
        Malformed("det-negative-x", t, "boxes_inside_left",
                  write(box_doc(boxes=[[-5, 10, 20, 20]]))),
        Malformed("det-beyond-width", t, "boxes_inside_right",
                  write(box_doc(boxes=[[10, 10, 10 ** 30, 20]]))),
        Malformed("det-missing-score", t, "one_score_per_box", write(box_doc(scores=[]))),
        Malformed("det-missing-label", t, "one_label_per_box", write(box_doc(labels=[]))),
        Malformed("det-unknown-label", t, "labels_known", write(box_doc(labels=[9]))),
        Malformed("det-float-label", t, "labels_known", write(box_doc(labels=[1.5]))),
        Malformed("det-101-boxes", t, "plausible_box_count",
                  write(box_doc(boxes=[[10, 10, 20, 20]] * 101, scores=[0.5] * 101,
                                labels=[1] * 101))),
        Malformed("det-200000-item-list", t, "json_list_size",
                  write(raw_box_doc(scores="[" + ",".join(["0"] * 200_000) + "]"))),
        Malformed("det-9MiB-document", t, "json_size",
                  write(box_doc() + b" " * (9 * 1024 * 1024))),
        Malformed("det-top-level-list", t, "detection_layout", write(boxes([[1, 2, 3, 4]]))),
        Malformed("det-top-level-string", t, "detection_layout", write(boxes("boxes"))),
        Malformed("det-no-scores-key", t, "detection_layout",
                  write(boxes({"boxes": [], "labels": []}))),
        Malformed("det-boxes-object", t, "detection_layout",
                  write(boxes({"boxes": {}, "scores": [], "labels": []}))),
        Malformed("det-invalid-json", t, "json_format", write(b'{"boxes": [1, 2')),
        Malformed("det-empty-file", t, "json_format", write(b"")),
        Malformed("det-utf8-bom", t, "json_format", write(b"\xef\xbb\xbf" + box_doc())),
        Malformed("det-not-utf8", t, "utf8", write(b'{"boxes": "\xff\xfe"}')),
        Malformed("det-utf16", t, "utf8", write(box_doc().decode().encode("utf-16"))),
        Malformed("det-257MiB-sparse", t, "file_size", sparse(257 * 1024 * 1024)),
        Malformed("det-symlink", t, "files_safe", symlink_output),
    ]


def _table_cases(task: str, key: str, value: str, short: str, nonempty: str,
                 limit: int) -> list[Malformed]:
    t = task
    return [
        Malformed(f"{t}-10MB-field", t, short,
                  edit_table(key, value, lambda v: "x" * (10 * 1024 * 1024)), heavy=True),
        Malformed(f"{t}-over-length", t, short,
                  edit_table(key, value, lambda v: "y" * (limit + 1))),
        Malformed(f"{t}-empty-value", t, nonempty, edit_table(key, value, lambda v: "")),
        Malformed(f"{t}-blank-value", t, nonempty, edit_table(key, value, lambda v: "   ")),
        Malformed(f"{t}-duplicate-row", t, "one_row_per_case", edit_table(key, value, dup=True)),
        Malformed(f"{t}-duplicate-row-third", t, "one_row_per_case",
                  edit_table(key, value, dup=True, target=2), target=2),
        Malformed(f"{t}-not-utf8", t, "utf8", table_bytes(lambda b: b + b"zz,\xff\xfe\n"),
                  scope="table"),
        Malformed(f"{t}-row-without-value", t, nonempty, key_only_row()),
        Malformed(f"{t}-missing-column", t, "csv_columns",
                  table_bytes(lambda b: b.replace(value.encode(), b"other", 1)), scope="table"),
        Malformed(f"{t}-semicolons", t, "csv_columns",
                  table_bytes(lambda b: b.replace(b",", b";")), scope="table"),
        Malformed(f"{t}-gzipped", t, "utf8", table_bytes(gzip.compress), scope="table"),
        Malformed(f"{t}-empty-file", t, "all_present", table_bytes(b""), scope="table"),
        Malformed(f"{t}-65MiB", t, "file_size", table_bytes(lambda b: b + b"#" * (65 * 2 ** 20)),
                  scope="table"),
        Malformed(f"{t}-unknown-id", t, "only_expected",
                  edit_table(key, value, extra_rows=[("nope-999", "yes")]), scope="extra"),
        Malformed(f"{t}-5000-unknown-ids", t, "only_expected",
                  edit_table(key, value, extra_rows=[(f"x{k}", "a") for k in range(5000)]),
                  scope="extra"),
        Malformed(f"{t}-table-symlink", t, "files_safe", symlink_output, scope="table"),
        Malformed(f"{t}-extra-columns", t, "unexpected column(s) 'confidence'",
                  table_bytes(lambda b: _with_column(b, "confidence", "0.9")), scope="table"),
        Malformed(f"{t}-extra-field-in-row", t, "line 3: 3 fields, the header has 2",
                  table_bytes(lambda b: _edit_line(b, 2, lambda x: x + b",left side")),
                  scope="table"),
        Malformed(f"{t}-unterminated-quote", t, "line 2: a quoted field opens on this line "
                  "and", table_bytes(lambda b: _edit_line(
                      b, 1, lambda x: x.split(b",", 1)[0] + b',"open')), scope="table"),
    ]


def _edit_line(data: bytes, index: int, edit: Callable[[bytes], bytes]) -> bytes:
    """``data`` with its line ``index`` (0: the header) passed through ``edit``."""
    lines = data.splitlines()
    lines[index] = edit(lines[index])
    return b"\n".join(lines) + b"\n"


def _with_column(data: bytes, column: str, value: str) -> bytes:
    """A CSV table with one more column (``value`` in every row)."""
    lines = data.splitlines()
    head = [lines[0] + f",{column}".encode()]
    return b"\n".join(head + [x + f",{value}".encode() for x in lines[1:] if x]) + b"\n"


def _extra_cases(task: str) -> list[Malformed]:
    return [
        Malformed(f"{task}-extra-non-utf8-name", task, "files_safe", extra("non_utf8_name"),
                  scope="extra", file="notes-\\xff\\xfe.txt"),
        Malformed(f"{task}-extra-1205-files", task, "only_expected", extra("many_files"),
                  scope="extra"),
        Malformed(f"{task}-extra-4GiB-sparse", task, "only_expected", extra("huge_sparse"),
                  scope="extra", file="huge.bin", heavy=task == SEG),
        Malformed(f"{task}-extra-symlink-out", task, "files_safe", extra("symlink_out"),
                  scope="extra", file="passwd"),
        Malformed(f"{task}-extra-fifo", task, "only_expected", extra("fifo"), scope="extra",
                  file="pipe"),
        Malformed(f"{task}-extra-directory", task, "only_expected", extra("directory"),
                  scope="extra", file="nested"),
        Malformed(f"{task}-symlinked-folder", task, "symlink", symlinked_folder, scope="folder"),
    ]


def imaging_corpus() -> list[Malformed]:
    """Every imaging-track case."""
    cases = [*_npy_cases(LDCT), *_npy_cases(SR), *_nifti_cases(), *_detection_cases(),
             *_table_cases(VQA, "question_id", "answer", "answer_short", "answer_nonempty",
                           500),
             *_table_cases(REP, "case_id", "report", "report_length", "report_nonempty",
                           10_000)]
    for task in IMAGING:
        cases += _extra_cases(task)
    return cases


# --- QA answers.jsonl ---------------------------------------------------------------------------

QALine = Callable[[dict[str, object]], bytes]
"""Turn a good answer line (as data) into the bad line's bytes."""


@dataclass(frozen=True)
class MalformedQA:
    """One bad line of ``answers.jsonl`` replacing the first item's line.

    ``attributed``: the reason lands on that item (else a card note names line and rule).
    ``whole``: the file as a whole is refused (every item unanswered, a note).
    """

    name: str
    rule: str
    line: QALine
    attributed: bool = True
    whole: bool = False


def _raw(text: str) -> QALine:
    return lambda a: text.replace("{ds}", str(a["dataset"])).replace(
        "{idx}", str(a["realidx"])).encode()


def qa_corpus() -> list[MalformedQA]:
    """Bad ``answers.jsonl`` lines and files."""
    head = '{"dataset": "{ds}", "realidx": "{idx}", '
    return [
        MalformedQA("qa-5000-digit-calls", "json_number",
                    _raw(head + '"answer": "A", "calls": ' + "1" * 5000 + "}")),
        MalformedQA("qa-400-digit-cost", "json_number",
                    _raw(head + '"answer": "A", "cost_usd": ' + "9" * 400 + "}")),
        MalformedQA("qa-100000-deep", "json_depth",
                    _raw(head + '"answer": ' + "[" * 100_000 + "]" * 100_000 + "}")),
        MalformedQA("qa-2MiB-line", "line_length",
                    _raw(head + '"answer": "' + "x" * (2 * 1024 * 1024) + '"}')),
        MalformedQA("qa-answer-int", "answer_schema",
                    lambda a: json.dumps({**a, "answer": 3}).encode()),
        MalformedQA("qa-answer-bool", "answer_schema",
                    lambda a: json.dumps({**a, "answer": True}).encode()),
        MalformedQA("qa-answer-object", "answer_schema",
                    lambda a: json.dumps({**a, "answer": {"x": 1}}).encode()),
        MalformedQA("qa-calls-string", "answer_schema",
                    lambda a: json.dumps({**a, "calls": "many"}).encode()),
        MalformedQA("qa-missing-calls", "answer_schema",
                    lambda a: json.dumps({k: v for k, v in a.items() if k != "calls"}).encode()),
        MalformedQA("qa-unknown-field", "answer_schema",
                    lambda a: json.dumps({**a, "bonus": 1}).encode()),
        MalformedQA("qa-truncated-line", "json_format",
                    lambda a: json.dumps(a).encode()[:-5]),
        MalformedQA("qa-not-utf8", "utf8",
                    lambda a: _raw(head + '"answer": "A", "raw": "')(a) + b'\xff\xfe"}'),
        MalformedQA("qa-top-level-list", "answer_schema", lambda a: b"[1, 2, 3]",
                    attributed=False),
        MalformedQA("qa-garbage", "json_format", lambda a: b"}}}{{{", attributed=False),
        MalformedQA("qa-realidx-number", "json_number",
                    lambda a: json.dumps({**a, "realidx": 10 ** 40}).encode(),
                    attributed=False),
    ]


# --- challenge ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class MalformedChallenge:
    """A bad challenge submission: ``files`` (relative name → bytes) over the good folder."""

    name: str
    challenge: str
    rule: str
    files: Callable[[Path], None]
    heavy: bool = False


def _csv_value(value: str) -> Callable[[Path], None]:
    def apply(sub: Path) -> None:
        lines = (sub / "submission.csv").read_text().splitlines()
        head, first, *rest = lines
        first = first.split(",")[0] + "," + value
        (sub / "submission.csv").write_text("\n".join([head, first, *rest]) + "\n")
    return apply


def _csv_bytes(data: bytes | Callable[[bytes], bytes]) -> Callable[[Path], None]:
    def apply(sub: Path) -> None:
        p = sub / "submission.csv"
        p.write_bytes(data(p.read_bytes()) if callable(data) else data)
    return apply


def _mask_file(data: bytes | Callable[[], bytes], name: str = "a.npy") -> Callable[[Path], None]:
    def apply(sub: Path) -> None:
        (sub / name).write_bytes(data() if callable(data) else data)
        if name != "a.npy":
            (sub / "submission.csv").write_text(
                (sub / "submission.csv").read_text().replace("a.npy", name))
    return apply


def _png_bomb() -> bytes:
    """A 100000 x 100000 greyscale PNG header with one tiny IDAT (a decompression bomb)."""
    def chunk(kind: bytes, body: bytes) -> bytes:
        return (struct.pack(">I", len(body)) + kind + body
                + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF))
    ihdr = struct.pack(">IIBBBBB", 100_000, 100_000, 8, 0, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr)
            + chunk(b"IDAT", zlib.compress(b"\x00" * 1000)) + chunk(b"IEND", b""))


def _tiff_bomb() -> bytes:
    """A TIFF whose only page declares 100000 x 100000 uint16 (no pixel data follows)."""
    entries = [(256, 4, 1, 100_000), (257, 4, 1, 100_000), (258, 3, 1, 16), (259, 3, 1, 1),
               (262, 3, 1, 1), (273, 4, 1, 8), (277, 3, 1, 1), (278, 4, 1, 100_000),
               (279, 4, 1, 2 * 10 ** 9)]
    ifd = struct.pack("<H", len(entries)) + b"".join(
        struct.pack("<HHI", tag, kind, n) + (struct.pack("<HH", v, 0) if kind == 3
                                             else struct.pack("<I", v))
        for tag, kind, n, v in entries) + struct.pack("<I", 0)
    return b"II*\x00" + struct.pack("<I", 8) + ifd


def challenge_corpus() -> list[MalformedChallenge]:
    """Bad submissions of a CSV challenge (ldct-iqa) and a file challenge (neurips-cellseg)."""
    ldct, cell = "ldct-iqa", "neurips-cellseg"
    return [
        MalformedChallenge("ldct-5000-digit-value", ldct, "not a finite number",
                           _csv_value("1" * 5000)),
        MalformedChallenge("ldct-1e400", ldct, "not a finite number", _csv_value("1e400")),
        MalformedChallenge("ldct-bool-value", ldct, "not a finite number", _csv_value("True")),
        MalformedChallenge("ldct-nan-value", ldct, "not a finite number", _csv_value("nan")),
        MalformedChallenge("ldct-10MB-field", ldct, "not a finite number",
                           _csv_value("x" * (10 * 1024 * 1024)), heavy=True),
        MalformedChallenge("ldct-not-utf8", ldct, "utf8", _csv_bytes(lambda b: b + b"\xff\n")),
        MalformedChallenge("ldct-empty", ldct, "csv_format", _csv_bytes(b"")),
        MalformedChallenge("ldct-65MiB", ldct, "table_size",
                           _csv_bytes(lambda b: b + b"#" * (65 * 2 ** 20))),
        MalformedChallenge("ldct-minus-infinity", ldct, "not a finite number",
                           _csv_value("-Infinity")),
        MalformedChallenge("ldct-duplicate-id", ldct, "duplicated case id",
                           _csv_bytes(lambda b: b + b.splitlines(keepends=True)[1])),
        MalformedChallenge("cell-npy-header-huge", cell, "array_size",
                           _mask_file(npy_header((2 ** 22, 2 ** 22, 2 ** 19))), heavy=True),
        MalformedChallenge("cell-npy-text", cell, "cannot read", _mask_file(b"hello")),
        MalformedChallenge("cell-npy-pickle", cell, "cannot read",
                           _mask_file(lambda: npy(np.array([None], dtype=object)))),
        MalformedChallenge("cell-png-bomb", cell, "array_size", _mask_file(_png_bomb, "a.png"),
                           heavy=True),
        MalformedChallenge("cell-tiff-bomb", cell, "array_size",
                           _mask_file(_tiff_bomb, "a.tiff"), heavy=True),
        MalformedChallenge("cell-wrong-shape", cell, "shape",
                           _mask_file(lambda: npy(np.zeros((3, 3), np.uint16)))),
        MalformedChallenge("cell-escaping-path", cell, "leaves the submission folder",
                           lambda sub: (sub / "submission.csv").write_text(
                               "image_id,predicted_mask_path\na,../ref/a.npy\n")),
        MalformedChallenge("cell-missing-file", cell, "not found",
                           lambda sub: (sub / "a.npy").unlink()),
        MalformedChallenge("cell-257MiB-sparse", cell, "file_size",
                           lambda sub: os.truncate(sub / "a.npy", 257 * 1024 * 1024)),
    ]
