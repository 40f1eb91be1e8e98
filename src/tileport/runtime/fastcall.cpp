// The op call's replay in one compiled function (tileport.runtime.fastcall builds it).
//
// A cutile-rs op call whose plan is cached and whose launch the library recorded (a prepared launch)
// does, per call: compare the inputs with the call key's layouts, allocate the output, read the data
// pointers, and call tileport_launch_prepared on the current stream. In Python that is the key tuple,
// torch.empty_like and a ctypes call; here it is the same work without the interpreter in between.
//
// `run(plans, inputs)` tries each plan of the op in turn: the first whose guards hold launches and
// returns the output; None when none does (the Python path then handles the call, and raises what it
// raises: a misaligned base, an aliasing output). A guard is exactly what the call key holds: per
// tensor its dtype, device, sizes and strides; per scalar its type and value.

#include <Python.h>

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_strided.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/python_variable.h>

#include <cstdint>
#include <vector>

namespace {

constexpr int kMaxDims = 6;  // runtime/abi.py MAX_DIMS: a key beyond it never reaches a tile plan
constexpr int kInput = 0;    // plan_cache.INPUT / OUTPUT: where an array argument lives
constexpr int kOutput = 1;

using LaunchPrepared = int32_t (*)(uint64_t, const uint64_t*, uint64_t);

struct Layout {
  c10::ScalarType dtype;
  c10::DeviceIndex device;
  int ndim;
  int64_t sizes[kMaxDims];
  int64_t strides[kMaxDims];

  static bool of(const at::Tensor& t, Layout* out) {
    if (!t.is_cuda() || t.dim() > kMaxDims) return false;
    out->dtype = t.scalar_type();
    out->device = t.get_device();
    out->ndim = static_cast<int>(t.dim());
    for (int d = 0; d < out->ndim; ++d) {
      out->sizes[d] = t.size(d);
      out->strides[d] = t.stride(d);
    }
    return true;
  }

  bool matches(const at::Tensor& t) const {
    if (t.scalar_type() != dtype || t.dim() != ndim || !t.is_cuda() || t.get_device() != device) return false;
    const int64_t* s = t.sizes().data();
    const int64_t* st = t.strides().data();
    for (int d = 0; d < ndim; ++d) {
      if (s[d] != sizes[d] || st[d] != strides[d]) return false;
    }
    return true;
  }
};

struct Guard {  // one positional input: a tensor layout, or a scalar's exact type and value
  bool tensor;
  Layout layout;
  PyObject* type;   // scalars: borrowed from `value`
  PyObject* value;  // owned
};

struct Source {
  int group;
  int index;
  int64_t offset;
};

struct Plan {
  PyObject_HEAD
  std::vector<Guard>* guards;
  std::vector<Source>* sources;
  Layout out;
  uint64_t handle;
  LaunchPrepared launch;
  PyObject* stream_of;  // device index -> raw stream handle (the capture stream inside a graph)
  PyObject* device;     // the device index as a Python int (stream_of's argument)
  PyObject* on_error;   // rc -> raises the typed error
  PyObject* keepalive;  // what keeps `handle` alive (the prepared launch's owner)
};

void plan_dealloc(PyObject* self) {
  Plan* p = reinterpret_cast<Plan*>(self);
  if (p->guards) {
    for (Guard& g : *p->guards) Py_XDECREF(g.value);
    delete p->guards;
  }
  delete p->sources;
  Py_XDECREF(p->stream_of);
  Py_XDECREF(p->device);
  Py_XDECREF(p->on_error);
  Py_XDECREF(p->keepalive);
  Py_TYPE(self)->tp_free(self);
}

PyTypeObject PlanType = {PyVarObject_HEAD_INIT(nullptr, 0)};

// 1: the inputs pass every guard; 0: they do not; -1: a Python error is set.
int guards_hold(const Plan* p, PyObject* inputs) {
  const Py_ssize_t n = PyTuple_GET_SIZE(inputs);
  if (n != static_cast<Py_ssize_t>(p->guards->size())) return 0;
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* x = PyTuple_GET_ITEM(inputs, i);
    const Guard& g = (*p->guards)[i];
    if (g.tensor) {
      if (!THPVariable_CheckExact(x)) return 0;
      const at::Tensor& t = THPVariable_Unpack(x);
      if (!g.layout.matches(t)) return 0;
    } else {
      if (Py_TYPE(x) != reinterpret_cast<PyTypeObject*>(g.type)) return 0;
      int equal = PyObject_RichCompareBool(x, g.value, Py_EQ);
      if (equal <= 0) return equal;
    }
  }
  return 1;
}

// The output tensor, or nullptr with a Python error set; Py_None (new reference) when the call must
// take the Python path (a misaligned base: that path raises the typed error).
PyObject* launch(const Plan* p, PyObject* inputs) {
  at::Tensor out = at::empty_strided(
      c10::IntArrayRef(p->out.sizes, p->out.ndim), c10::IntArrayRef(p->out.strides, p->out.ndim),
      at::TensorOptions().dtype(p->out.dtype).device(c10::Device(c10::DeviceType::CUDA, p->out.device)));
  uint64_t addresses[32];
  uint64_t any = 0;
  size_t k = 0;
  for (const Source& s : *p->sources) {
    const at::Tensor& t = s.group == kOutput ? out : THPVariable_Unpack(PyTuple_GET_ITEM(inputs, s.index));
    addresses[k] = reinterpret_cast<uint64_t>(t.data_ptr()) + static_cast<uint64_t>(s.offset);
    any |= addresses[k++];
  }
  if (any & 15) Py_RETURN_NONE;
  PyObject* stream = PyObject_CallOneArg(p->stream_of, p->device);
  if (!stream) return nullptr;
  const uint64_t handle = PyLong_AsUnsignedLongLong(stream);
  Py_DECREF(stream);
  if (handle == static_cast<uint64_t>(-1) && PyErr_Occurred()) return nullptr;
  const int32_t rc = p->launch(p->handle, addresses, handle);
  if (rc != 0) {
    PyObject* code = PyLong_FromLong(rc);
    PyObject* raised = code ? PyObject_CallOneArg(p->on_error, code) : nullptr;
    Py_XDECREF(code);
    Py_XDECREF(raised);
    if (!PyErr_Occurred()) PyErr_Format(PyExc_RuntimeError, "tileport_launch_prepared returned %d", rc);
    return nullptr;
  }
  return THPVariable_Wrap(std::move(out));
}

// run(plans: tuple, inputs: tuple) -> Tensor | None
PyObject* run(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  HANDLE_TH_ERRORS
  if (nargs != 2 || !PyTuple_Check(args[0]) || !PyTuple_Check(args[1])) {
    PyErr_SetString(PyExc_TypeError, "run(plans: tuple, inputs: tuple)");
    return nullptr;
  }
  PyObject* plans = args[0];
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(plans); ++i) {
    PyObject* item = PyTuple_GET_ITEM(plans, i);
    if (Py_TYPE(item) != &PlanType) {
      PyErr_SetString(PyExc_TypeError, "run: plans must be fastcall plans");
      return nullptr;
    }
    const Plan* p = reinterpret_cast<Plan*>(item);
    const int ok = guards_hold(p, args[1]);
    if (ok < 0) return nullptr;
    if (ok) return launch(p, args[1]);
  }
  Py_RETURN_NONE;
  END_HANDLE_TH_ERRORS
}

bool parse_guards(PyObject* inputs, std::vector<Guard>* guards) {
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(inputs); ++i) {
    PyObject* x = PyTuple_GET_ITEM(inputs, i);
    Guard g{};
    if (THPVariable_CheckExact(x)) {
      g.tensor = true;
      if (!Layout::of(THPVariable_Unpack(x), &g.layout)) return false;
    } else if (PyBool_Check(x) || PyLong_CheckExact(x) || PyFloat_CheckExact(x)) {
      Py_INCREF(x);
      g.value = x;
      g.type = reinterpret_cast<PyObject*>(Py_TYPE(x));
    } else {
      return false;
    }
    guards->push_back(g);
  }
  return true;
}

bool parse_sources(PyObject* sources, Py_ssize_t n_inputs, std::vector<Source>* out) {
  if (PyTuple_GET_SIZE(sources) > 32) return false;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(sources); ++i) {
    Source s{};
    long long offset = 0;
    if (!PyArg_ParseTuple(PyTuple_GET_ITEM(sources, i), "iiL", &s.group, &s.index, &offset)) return false;
    s.offset = offset;
    if (!((s.group == kInput && s.index >= 0 && s.index < n_inputs) || (s.group == kOutput && s.index == 0))) {
      PyErr_SetString(PyExc_ValueError, "plan: a source is neither an input nor the one output");
      return false;
    }
    out->push_back(s);
  }
  return true;
}

// plan(inputs, output, sources, handle, launch_address, stream_of, on_error, keepalive)
//   -> Plan, or None when the call cannot be guarded here (a tensor subclass, a non-CUDA tensor, an
//   input that is neither a tensor nor a bool/int/float).
PyObject* make_plan(PyObject*, PyObject* args) {
  HANDLE_TH_ERRORS
  PyObject *inputs, *output, *sources, *stream_of, *on_error, *keepalive;
  unsigned long long handle, address;
  if (!PyArg_ParseTuple(args, "O!OO!KKOOO", &PyTuple_Type, &inputs, &output, &PyTuple_Type, &sources, &handle,
                        &address, &stream_of, &on_error, &keepalive)) {
    return nullptr;
  }
  if (!THPVariable_CheckExact(output) || handle == 0 || address == 0) Py_RETURN_NONE;
  Plan* p = PyObject_New(Plan, &PlanType);
  if (!p) return nullptr;
  p->guards = new std::vector<Guard>();
  p->sources = new std::vector<Source>();
  p->stream_of = p->device = p->on_error = p->keepalive = nullptr;
  PyObject* self = reinterpret_cast<PyObject*>(p);
  if (!parse_guards(inputs, p->guards) || !Layout::of(THPVariable_Unpack(output), &p->out)) {
    Py_DECREF(self);
    Py_RETURN_NONE;
  }
  if (!parse_sources(sources, PyTuple_GET_SIZE(inputs), p->sources)) {
    Py_DECREF(self);
    if (PyErr_Occurred()) return nullptr;
    Py_RETURN_NONE;
  }
  p->handle = handle;
  p->launch = reinterpret_cast<LaunchPrepared>(static_cast<uintptr_t>(address));
  p->device = PyLong_FromLong(p->out.device);
  Py_INCREF(stream_of);
  Py_INCREF(on_error);
  Py_INCREF(keepalive);
  p->stream_of = stream_of;
  p->on_error = on_error;
  p->keepalive = keepalive;
  return self;
  END_HANDLE_TH_ERRORS
}

PyMethodDef methods[] = {
    {"run", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(run)), METH_FASTCALL,
     "run(plans, inputs) -> the output of the first plan whose guards hold, else None"},
    {"plan", make_plan, METH_VARARGS,
     "plan(inputs, output, sources, handle, launch_address, stream_of, on_error, keepalive) -> Plan | None"},
    {nullptr, nullptr, 0, nullptr}};

#define TILEPORT_STR_NAME(name) #name
#define TILEPORT_STR(name) TILEPORT_STR_NAME(name)

PyModuleDef module = {PyModuleDef_HEAD_INIT, TILEPORT_STR(TORCH_EXTENSION_NAME), "tileport's compiled op-call replay",
                      -1, methods};

}  // namespace

#define TILEPORT_INIT_NAME(name) PyInit_##name
#define TILEPORT_INIT(name) TILEPORT_INIT_NAME(name)

PyMODINIT_FUNC TILEPORT_INIT(TORCH_EXTENSION_NAME)(void) {
  PlanType.tp_name = "tileport_fastcall.Plan";
  PlanType.tp_basicsize = sizeof(Plan);
  PlanType.tp_flags = Py_TPFLAGS_DEFAULT;
  PlanType.tp_dealloc = plan_dealloc;
  PlanType.tp_doc = "A cached op call's guards and prepared launch";
  if (PyType_Ready(&PlanType) < 0) return nullptr;
  return PyModule_Create(&module);
}
