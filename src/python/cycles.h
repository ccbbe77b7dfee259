// memguard's cycle collections beyond compiles, on the torch side (issue: cycle-aware release):
// after a recomputed backward (memguard_cycles.py wraps the backward of checkpoint functions), at
// every N-th step end, and the explanation of what a collection's garbage held
// (memguard_explain.py). The Python files decide when; these natives decide whether (the switches,
// the safety rules, the time budget: gc_accounting.h) and write the records.
#pragma once

namespace memguard::python {

struct PyObject;

/// Runs memguard_cycles.py and memguard_explain.py in the torch side's namespace `ns` (after
/// memguard_torch.py) with their natives and switches, and hands the explainer to the collections.
/// False with an error set when they cannot run.
bool install_cycles(PyObject* ns);

}  // namespace memguard::python
