// A Python extension whose one function wraps libmemguard.so's memguard_alloc in PyTorch's own
// HANDLE_TH_ERRORS / END_HANDLE_TH_ERRORS (torch/csrc/Exceptions.h), the handler every torch
// binding uses and the one a CUDAPluggableAllocator failure crosses into Python through. On the
// CPU wheel nothing in torch calls a pluggable allocator, so this is the seam binding_oom.py
// drives: mg_torch_binding.alloc(nbytes) -> memguard_alloc(nbytes, 0, default stream);
// alloc_released(nbytes) the same with the GIL released (python.allocator_mode_apis).
#include <Python.h>

#include <dlfcn.h>

#include <string>
#include <thread>

#include <torch/csrc/Exceptions.h>

namespace {

using AllocFn = void* (*)(size_t, int, void*);

/// memguard_alloc, found as torch.cuda.memory.CUDAPluggableAllocator's ctypes lookup finds it.
AllocFn memguard_alloc_fn() {
    static auto fn = reinterpret_cast<AllocFn>(dlsym(RTLD_DEFAULT, "memguard_alloc"));
    TORCH_CHECK(fn, "memguard_alloc not found: is libmemguard.so preloaded?");
    return fn;
}

PyObject* alloc(PyObject*, PyObject* arg) {
    HANDLE_TH_ERRORS
    AllocFn fn = memguard_alloc_fn();
    size_t n = PyLong_AsSize_t(arg);
    if (PyErr_Occurred()) return nullptr;
    return PyLong_FromVoidPtr(fn(n, 0, nullptr));
    END_HANDLE_TH_ERRORS
}

/// The GIL released around the call, as PyTorch's operators release it (pybind11's
/// gil_scoped_release): the exception unwinds through the release, which takes the GIL back
/// before HANDLE_TH_ERRORS turns it into a Python error.
struct Released {
    PyThreadState* state = PyEval_SaveThread();
    ~Released() { PyEval_RestoreThread(state); }
};

PyObject* alloc_released(PyObject*, PyObject* arg) {
    HANDLE_TH_ERRORS
    AllocFn fn = memguard_alloc_fn();
    size_t n = PyLong_AsSize_t(arg);
    if (PyErr_Occurred()) return nullptr;
    void* p = nullptr;
    {
        Released no_gil;
        p = fn(n, 0, nullptr);
    }
    return PyLong_FromVoidPtr(p);
    END_HANDLE_TH_ERRORS
}

/// memguard_alloc on a thread that never ran Python (PyTorch's allocating threads may be such, an
/// autograd worker say), the GIL released while it runs; its failure comes back as MemoryError
/// with the exception's text.
PyObject* alloc_on_thread(PyObject*, PyObject* arg) {
    HANDLE_TH_ERRORS
    AllocFn fn = memguard_alloc_fn();
    size_t n = PyLong_AsSize_t(arg);
    if (PyErr_Occurred()) return nullptr;
    void* p = nullptr;
    std::string error;
    {
        Released no_gil;
        std::thread t([&] {
            try {
                p = fn(n, 0, nullptr);
            } catch (const std::exception& e) {
                error = e.what();
            }
        });
        t.join();
    }
    if (!error.empty()) {
        PyErr_SetString(PyExc_MemoryError, error.c_str());
        return nullptr;
    }
    return PyLong_FromVoidPtr(p);
    END_HANDLE_TH_ERRORS
}

PyMethodDef methods[] = {{"alloc", alloc, METH_O, "memguard_alloc(nbytes, 0, nullptr) inside HANDLE_TH_ERRORS"},
                         {"alloc_released", alloc_released, METH_O,
                          "alloc(), with the GIL released around memguard_alloc"},
                         {"alloc_on_thread", alloc_on_thread, METH_O,
                          "memguard_alloc on a new thread that never ran Python"},
                         {nullptr, nullptr, 0, nullptr}};

PyModuleDef module =
    {PyModuleDef_HEAD_INIT, "mg_torch_binding", nullptr, -1, methods, nullptr, nullptr, nullptr, nullptr};

}  // namespace

PyMODINIT_FUNC PyInit_mg_torch_binding() { return PyModule_Create(&module); }
