// vit.train(**keywords): the options of `vit train` as keywords, checked by the training options'
// table (train/train_options.h) so a wrong name or value gets the command's message, and an
// optional per-epoch callback that can stop the run. The GIL is released while it trains.
#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include "convert.h"
#include "vit/vit.h"

namespace vit::python {
namespace {

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
  const std::vector<vit::Keyword> options = keywords_of(kwargs, "train");
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
