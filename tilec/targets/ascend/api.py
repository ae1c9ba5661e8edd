"""AscendC API spellings per CANN version, as data. The lowering writes CANN 8.x names (asc-devkit v8.5.0, the
version tilec's CPU model follows); codegen.respell maps every entry listed here to another version's spelling,
so a rename between versions is one edit in this table. 9.x renames a few entries (WholeReduceSum ->
ReduceRepeat, InitConstValue -> Fill); where a rename also changes the parameters, the table is not enough and
the lowering must learn the new form -- which is why 8.x stays the default."""

from __future__ import annotations

DEFAULT_VERSION = "8"

_CANN8 = {name: name for name in (
    "TPipe", "TQue", "TBuf", "GlobalTensor", "LocalTensor", "InitBuffer", "AllocTensor", "EnQue", "DeQue",
    "FreeTensor", "Get", "SetGlobalBuffer", "DataCopy", "DataCopyPad", "DataCopyExtParams", "DataCopyPadExtParams",
    "Add", "Sub", "Mul", "Div", "Max", "Min", "Adds", "Muls", "Maxs", "Mins", "Exp", "Ln", "Abs", "Sqrt", "Rsqrt",
    "Duplicate", "Cast", "CreateVecIndex", "CompareScalar", "Compare", "Select", "Gather", "WholeReduceSum",
    "WholeReduceMax", "WholeReduceMin", "Brcb", "BrcbRepeatParams", "BinaryRepeatParams", "UnaryRepeatParams",
    "Nd2NzParams", "LoadData", "LoadData2DParams", "Mmad", "MmadParams", "Fixpipe", "FixpipeParamsV220",
    "InitConstValue", "InitConstValueParams", "SetFlag", "WaitFlag", "PipeBarrier", "FetchEventID",
    "CrossCoreSetFlag", "CrossCoreWaitFlag", "GetBlockIdx", "GetBlockNum", "GetSubBlockIdx", "GetTPipePtr",
    "ReinterpretCast",
)}

SPELLINGS: dict[str, dict[str, str]] = {
    "8": _CANN8,
    "9": {**_CANN8, "WholeReduceSum": "ReduceRepeat", "InitConstValue": "Fill"},
}


def api(name: str, version: str = DEFAULT_VERSION) -> str:
    """The spelling of AscendC API entry `name` in CANN `version` (KeyError: an entry the table lacks)."""
    return SPELLINGS[version][name]
