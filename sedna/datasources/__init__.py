"""Ianvs stand-in for ``sedna.datasources``: dataset parsers (pandas/pycocotools lazily)."""
from core.compat.sedna_datasources import (BaseDataSource, CSVDataParse, IndexDataParse,
                                           JSONDataParse, TxtDataParse)

__all__ = ["BaseDataSource", "TxtDataParse", "IndexDataParse", "CSVDataParse",
           "JSONDataParse"]
__ianvs_shim__ = True
