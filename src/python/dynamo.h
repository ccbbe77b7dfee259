// Registration with torch._dynamo's compile callbacks (torch/_dynamo/callback.py): memguard's
// start and end callbacks, and a wrapper of callback_handler.clear so that torch._dynamo.reset()
// (which clears every registered callback) does not drop them. GIL held.
#pragma once

namespace memguard::python {

/// True once memguard's callbacks are registered.
bool dynamo_registered();

/// On an "import" event until dynamo_registered(): registers once torch._dynamo.callback has loaded.
void try_register_dynamo();

}  // namespace memguard::python
