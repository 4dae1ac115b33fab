"""Metrics of the self-align scenario: ``selfalign`` (alignment, hidden pass@1, false
alignment, test validity, cost; core.scenarios.selfalign.metrics) and the codegen metrics on the
final code (``pass_at_k``: hidden tests, outcome counts, grading tier; ``repo_tests`` for the
repository-level set, testenv_repo.yaml)."""
from sedna.common.class_factory import ClassFactory, ClassType

from core.scenarios.selfalign.metrics import selfalign
from core.scenarios.repo.scoring import repo_tests
from core.scenarios.codegen.metrics import pass_at_k
from core.testcasecontroller.metrics.edge_cost import edge_cost

ClassFactory.register_cls(selfalign, ClassType.GENERAL, alias="selfalign")
ClassFactory.register_cls(pass_at_k, ClassType.GENERAL, alias="pass_at_k")
ClassFactory.register_cls(edge_cost, ClassType.GENERAL, alias="edge_cost")
ClassFactory.register_cls(repo_tests, ClassType.GENERAL, alias="repo_tests")
