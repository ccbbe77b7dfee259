// The interpreter's own directories, written as e records (minor 8) for the report's user-frame
// rule: once at start-up, and torch's once it is imported. GIL held; never on an allocation's path.
#pragma once

namespace memguard::python {

/// Records the standard library, site, prefix and memguard directories (interpreter_paths.py).
void record_start_paths();
/// On an import event: records torch's directories the first time torch is in sys.modules.
void record_torch_paths_if_imported();

}  // namespace memguard::python
