// vit.train(**keywords): the options of `vit train` as keywords, checked by the training options'
// table (train/train_options.h) so a wrong name or value gets the command's message, and an
// optional per-epoch callback that can stop the run. The GIL is released while it trains.
#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include "convert.h"
#include "vit/vit.h"

namespace vit::python {
namespace {

// vit.train(**keywords): data="d", epochs=3, hflip=False, mean=[0.5] -> {"data", {"d"}}, {"epochs", {"3"}},
// {"hflip", {"false"}}, {"mean", {"0.5"}}: the facade's keyword form. None: not given.
std::vector<vit::TrainOption> train_options(const py::kwargs& kwargs) {
  auto text = [](const py::handle& v, const std::string& key) -> std::string {
    if (py::isinstance<py::bool_>(v)) return v.cast<bool>() ? "true" : "false";
    if (py::isinstance<py::int_>(v) || py::isinstance<py::float_>(v) || py::isinstance<py::str>(v)) return py::str(v);
    throw vit::Error("[train] " + key + ": takes a number, a string or True/False, got a " + type_name(v));
  };
  std::vector<vit::TrainOption> options;
  for (const auto& [k, v] : kwargs) {
    const std::string key = py::str(k);
    if (v.is_none()) continue;
    vit::TrainOption o{key, {}};
    if (py::isinstance<py::list>(v) || py::isinstance<py::tuple>(v)) {
      for (const auto& item : v) o.values.push_back(text(item, key));
    } else {
      o.values.push_back(text(v, key));
    }
    options.push_back(std::move(o));
  }
  return options;
}

py::dict epoch_dict(const vit::EpochReport& e) {
  py::dict d;
  d["epoch"] = e.epoch;
  d["epochs"] = e.epochs;
  d["train_loss"] = e.train_loss;
  d["train_accuracy"] = e.train_accuracy;
  d["test_loss"] = e.test_loss;
  d["test_accuracy"] = e.test_accuracy;
  d["test_top5"] = e.test_top5;
  d["learning_rate"] = e.learning_rate;
  d["images_per_second"] = e.images_per_second;
  d["epoch_seconds"] = e.epoch_seconds;
  d["elapsed_seconds"] = e.elapsed_seconds;
  d["step"] = e.step;
  d["checkpoint"] = e.checkpoint;
  return d;
}

// on_epoch(report) after each epoch's checkpoint; None or a true answer keeps the run going.
std::function<bool(const vit::EpochReport&)> epoch_callback(const py::object& on_epoch) {
  if (on_epoch.is_none()) return {};
  if (!PyCallable_Check(on_epoch.ptr())) {
    throw vit::Error("[train] on_epoch must be a function (called with each epoch's report), got a " +
                     type_name(on_epoch));
  }
  return [on_epoch](const vit::EpochReport& e) {
    py::gil_scoped_acquire acquire;
    const py::object keep_going = on_epoch(epoch_dict(e));
    if (keep_going.is_none()) return true;
    const int truth = PyObject_IsTrue(keep_going.ptr());  // Python's truth of any answer
    if (truth < 0) throw py::error_already_set();
    return truth == 1;
  };
}

py::dict train(const py::object& on_epoch, const py::kwargs& kwargs) {
  const std::vector<vit::TrainOption> options = train_options(kwargs);
  const std::function<bool(const vit::EpochReport&)> callback = epoch_callback(on_epoch);
  vit::TrainReport r;
  {
    py::gil_scoped_release release;
    r = vit::train_keywords(options, callback);
  }
  py::dict d;
  d["epochs_run"] = r.epochs_run;
  d["final_test_accuracy"] = r.final_test_accuracy;
  d["best_test_accuracy"] = r.best_test_accuracy;
  d["seconds"] = r.seconds;
  return d;
}

}  // namespace

void bind_train(py::module_& m) {
  m.def("train", &train, py::arg("on_epoch") = py::none(),
        "Train with the flags of `vit train` as keywords (data='data/mnist', preset='vit_digits', epochs=3, "
        "out='runs/x', hflip=True, ...). on_epoch(dict) runs after each epoch's checkpoint; returning False stops "
        "the run there (resume=DIR continues it).");
}

}  // namespace vit::python
