// Reading an ONNX ModelProto into io::OnnxModel (see onnx.h), with Debian's libonnx generated
// classes and protobuf. Every tensor is checked before its bytes are touched: a known element type,
// dims >= 0 whose product (and its bytes) fits, data of exactly that many bytes (raw_data, the typed
// field, or external data inside the model's folder).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cstring>
#include <filesystem>

#include "core/check.h"
#include "core/printable.h"
#include "core/shape.h"
#include "io/float16.h"
#include "io/mapped_file.h"
#include "io/onnx.h"
#include "onnx/onnx_pb.h"

namespace vit::io {

const OnnxAttribute* OnnxNode::attribute(const std::string& attr_name) const {
  for (const OnnxAttribute& a : attributes)
    if (a.name == attr_name) return &a;
  return nullptr;
}

const Tensor* OnnxModel::constant(const std::string& name) const {
  for (const auto& [n, t] : constants)
    if (n == name) return &t;
  return nullptr;
}

bool looks_like_onnx(const unsigned char* b, size_t size) {
  return size >= 3 && b[0] == 0x08 && b[1] >= 1 && b[1] <= 32 &&
         (b[2] == 0x12 || b[2] == 0x1a || b[2] == 0x22 || b[2] == 0x28 || b[2] == 0x32 || b[2] == 0x3a || b[2] == 0x42);
}

bool is_onnx_file(const std::string& path) {
  if (path.size() > 5 && path.compare(path.size() - 5, 5, ".onnx") == 0) return true;
  const int fd = open_regular_file(path, "file");
  unsigned char head[9] = {};
  const ssize_t got = ::read(fd, head, sizeof(head));
  ::close(fd);
  if (got == 9 && head[8] == '{') return false;  // a safetensors header whose length starts so
  return got > 0 && looks_like_onnx(head, static_cast<size_t>(got));
}

namespace {

constexpr int64_t kMaxElements = int64_t{1} << 40;  // far beyond any model; keeps byte counts in range

const char* type_name(int32_t type) {
  switch (type) {
    case onnx::TensorProto::FLOAT:
      return "float";
    case onnx::TensorProto::UINT8:
      return "uint8";
    case onnx::TensorProto::INT8:
      return "int8";
    case onnx::TensorProto::INT32:
      return "int32";
    case onnx::TensorProto::INT64:
      return "int64";
    case onnx::TensorProto::BOOL:
      return "bool";
    case onnx::TensorProto::FLOAT16:
      return "float16";
    case onnx::TensorProto::DOUBLE:
      return "double";
    case onnx::TensorProto::BFLOAT16:
      return "bfloat16";
    case onnx::TensorProto::STRING:
      return "string";
    default:
      return "an element type vit does not read";
  }
}

size_t element_bytes(int32_t type) {
  switch (type) {
    case onnx::TensorProto::UINT8:
    case onnx::TensorProto::INT8:
    case onnx::TensorProto::BOOL:
      return 1;
    case onnx::TensorProto::FLOAT16:
    case onnx::TensorProto::BFLOAT16:
      return 2;
    case onnx::TensorProto::FLOAT:
    case onnx::TensorProto::INT32:
      return 4;
    case onnx::TensorProto::INT64:
    case onnx::TensorProto::DOUBLE:
      return 8;
    default:
      return 0;
  }
}

struct Reader {
  std::string path, base_dir;

  // External data: location relative to the model's folder, inside it (after links), offset and
  // length within the file. Returns the bytes.
  std::string external_bytes(const onnx::TensorProto& t, const std::string& what, uint64_t want) const {
    std::string location;
    uint64_t offset = 0;
    int64_t length = -1;
    for (const auto& e : t.external_data()) {
      const auto number = [&](const std::string& v) {
        VIT_CHECK(!v.empty() && v.size() <= 18 && v.find_first_not_of("0123456789") == std::string::npos, "onnx",
                  "{}: {}: external data {} '{}' is not a whole number", path, what, e.key(), printable(v));
        return std::stoll(v);
      };
      if (e.key() == "location") location = e.value();
      if (e.key() == "offset") offset = static_cast<uint64_t>(number(e.value()));
      if (e.key() == "length") length = number(e.value());
    }
    VIT_CHECK(!base_dir.empty(), "onnx", "{}: {}: external data ('{}') is read only from a model file on disk", path,
              what, printable(location));
    VIT_CHECK(!location.empty(), "onnx", "{}: {}: external data without a location", path, what);
    const std::filesystem::path rel(location);
    VIT_CHECK(rel.is_relative() && location.find('\0') == std::string::npos, "onnx",
              "{}: {}: external data location '{}' is not a path relative to the model's folder", path, what,
              printable(location));
    for (const auto& part : rel) {
      VIT_CHECK(part != "..", "onnx", "{}: {}: external data location '{}' leaves the model's folder ('..')", path,
                what, printable(location));
    }
    std::error_code ec;
    const std::filesystem::path base = std::filesystem::weakly_canonical(base_dir, ec);
    const std::filesystem::path full = std::filesystem::weakly_canonical(std::filesystem::path(base_dir) / rel, ec);
    const std::string b = base.string() + "/", f = full.string();
    VIT_CHECK(!ec && f.compare(0, b.size(), b) == 0, "onnx",
              "{}: {}: external data location '{}' leads outside the model's folder", path, what, printable(location));
    const MappedFile file = map_file(f, "onnx");
    VIT_CHECK(length < 0 || static_cast<uint64_t>(length) == want, "onnx",
              "{}: {}: external data length {} but its shape and type need {} bytes", path, what, length, want);
    VIT_CHECK(offset <= file.size && want <= file.size - offset, "onnx",
              "{}: {}: external data {} bytes at offset {} lie past the end of '{}' ({} bytes)", path, what, want,
              offset, printable(location), file.size);
    return std::string(file.data + offset, want);
  }

  Tensor tensor(const onnx::TensorProto& t, const std::string& what) const {
    const int32_t type = t.data_type();
    const size_t esize = element_bytes(type);
    VIT_CHECK(esize > 0, "onnx", "{}: {} has element type {} ({}), which vit does not read", path, what, type,
              type_name(type));
    Shape shape;
    int64_t n = 1;
    for (int64_t d : t.dims()) {
      VIT_CHECK(d >= 0, "onnx", "{}: {} has a negative dim {}", path, what, d);
      VIT_CHECK(d == 0 || n <= kMaxElements / d, "onnx", "{}: {}: dims too large ({} elements and more)", path, what,
                n);
      n *= d;
      shape.push_back(d);
    }
    VIT_CHECK(t.dims_size() <= 8, "onnx", "{}: {} has {} dims (at most 8 are read)", path, what, t.dims_size());
    const uint64_t want = static_cast<uint64_t>(n) * esize;
    std::string external;
    const std::string* raw = nullptr;
    if (t.data_location() == onnx::TensorProto::EXTERNAL) {
      external = external_bytes(t, what, want);
      raw = &external;
    } else if (t.has_raw_data()) {
      raw = &t.raw_data();
    }
    const DType out = type == onnx::TensorProto::FLOAT || type == onnx::TensorProto::FLOAT16 ||
                              type == onnx::TensorProto::DOUBLE || type == onnx::TensorProto::BFLOAT16
                          ? DType::F32
                      : type == onnx::TensorProto::INT8 ? DType::I8
                                                        : DType::I64;
    const auto count = [&](int64_t got, const char* field) {
      VIT_CHECK(got == n, "onnx", "{}: {} holds {} values in {} but its dims {} need {}", path, what, got, field,
                shape_str(shape), n);
    };
    // The data's size is checked against the dims before anything is allocated for them.
    if (raw != nullptr) {
      VIT_CHECK(raw->size() == want, "onnx", "{}: {} holds {} bytes of data but its dims {} and type {} need {}", path,
                what, raw->size(), shape_str(shape), type_name(type), want);
    } else if (type == onnx::TensorProto::FLOAT) {
      count(t.float_data_size(), "float_data");
    } else if (type == onnx::TensorProto::DOUBLE) {
      count(t.double_data_size(), "double_data");
    } else if (type == onnx::TensorProto::INT64) {
      count(t.int64_data_size(), "int64_data");
    } else {
      count(t.int32_data_size(), "int32_data");
    }
    Tensor result = Tensor::empty(shape, out);
    if (raw != nullptr) {
      const char* p = raw->data();
      for (int64_t i = 0; i < n; ++i) {
        const char* e = p + static_cast<size_t>(i) * esize;
        switch (type) {
          case onnx::TensorProto::FLOAT:
            std::memcpy(result.data<float>() + i, e, 4);
            break;
          case onnx::TensorProto::DOUBLE: {
            double v;
            std::memcpy(&v, e, 8);
            result.data<float>()[i] = static_cast<float>(v);
            break;
          }
          case onnx::TensorProto::FLOAT16:
          case onnx::TensorProto::BFLOAT16: {
            uint16_t h;
            std::memcpy(&h, e, 2);
            result.data<float>()[i] = type == onnx::TensorProto::FLOAT16 ? half_to_float(h) : bf16_to_float(h);
            break;
          }
          case onnx::TensorProto::INT8:
            std::memcpy(result.data<int8_t>() + i, e, 1);
            break;
          case onnx::TensorProto::UINT8:
          case onnx::TensorProto::BOOL:
            result.data<int64_t>()[i] = static_cast<unsigned char>(*e);
            break;
          case onnx::TensorProto::INT32: {
            int32_t v;
            std::memcpy(&v, e, 4);
            result.data<int64_t>()[i] = v;
            break;
          }
          default:
            std::memcpy(result.data<int64_t>() + i, e, 8);
        }
      }
      return result;
    }
    switch (type) {
      case onnx::TensorProto::FLOAT:
        std::copy(t.float_data().begin(), t.float_data().end(), result.data<float>());
        break;
      case onnx::TensorProto::DOUBLE:
        for (int64_t i = 0; i < n; ++i)
          result.data<float>()[i] = static_cast<float>(t.double_data(static_cast<int>(i)));
        break;
      case onnx::TensorProto::INT64:
        std::copy(t.int64_data().begin(), t.int64_data().end(), result.data<int64_t>());
        break;
      default:  // int32, int8, uint8, bool, float16, bfloat16: int32_data
        for (int64_t i = 0; i < n; ++i) {
          const int32_t v = t.int32_data(static_cast<int>(i));
          if (out == DType::F32) {
            const auto h = static_cast<uint16_t>(v);
            result.data<float>()[i] = type == onnx::TensorProto::FLOAT16 ? half_to_float(h) : bf16_to_float(h);
          } else if (out == DType::I8) {
            VIT_CHECK(v >= -128 && v <= 127, "onnx", "{}: {} holds {} in int32_data, not an int8", path, what, v);
            result.data<int8_t>()[i] = static_cast<int8_t>(v);
          } else {
            result.data<int64_t>()[i] = v;
          }
        }
    }
    return result;
  }

  OnnxValue value(const onnx::ValueInfoProto& v) const {
    OnnxValue out;
    out.name = v.name();
    if (v.type().has_tensor_type()) {
      const auto& tt = v.type().tensor_type();
      out.type = type_name(tt.elem_type());
      for (const auto& d : tt.shape().dim()) out.dims.push_back(d.has_dim_value() ? d.dim_value() : -1);
    } else {
      out.type = "not a tensor";
    }
    return out;
  }

  OnnxNode node(const onnx::NodeProto& n, size_t index) const {
    OnnxNode out;
    out.name = n.name();
    out.op_type = n.op_type();
    out.domain = n.domain();
    out.label = n.name().empty() ? fmt::format("node #{} ({})", index, printable(n.op_type()))
                                 : fmt::format("node '{}' ({})", printable(n.name()), printable(n.op_type()));
    out.inputs.assign(n.input().begin(), n.input().end());
    out.outputs.assign(n.output().begin(), n.output().end());
    for (const auto& a : n.attribute()) {
      OnnxAttribute attr;
      attr.name = a.name();
      switch (a.type()) {
        case onnx::AttributeProto::INT:
          attr.kind = OnnxAttribute::Kind::Int;
          attr.i = a.i();
          break;
        case onnx::AttributeProto::FLOAT:
          attr.kind = OnnxAttribute::Kind::Float;
          attr.f = a.f();
          break;
        case onnx::AttributeProto::INTS:
          attr.kind = OnnxAttribute::Kind::Ints;
          attr.ints.assign(a.ints().begin(), a.ints().end());
          break;
        case onnx::AttributeProto::FLOATS:
          attr.kind = OnnxAttribute::Kind::Floats;
          attr.floats.assign(a.floats().begin(), a.floats().end());
          break;
        case onnx::AttributeProto::STRING:
          attr.kind = OnnxAttribute::Kind::String;
          attr.s = a.s();
          break;
        case onnx::AttributeProto::TENSOR:
          attr.kind = OnnxAttribute::Kind::Tensor;
          attr.t = tensor(a.t(), fmt::format("{}'s attribute '{}'", out.label, printable(a.name())));
          break;
        case onnx::AttributeProto::GRAPH:
        case onnx::AttributeProto::GRAPHS:
          fail("onnx", "{}: {} holds a subgraph (attribute '{}'): control flow is not part of a ViT graph", path,
               out.label, printable(a.name()));
        default:
          attr.kind = OnnxAttribute::Kind::Other;
      }
      out.attributes.push_back(std::move(attr));
    }
    return out;
  }
};

}  // namespace

OnnxModel parse_onnx(const void* data, size_t size, const std::string& path, const std::string& base_dir) {
  VIT_CHECK(size <= static_cast<size_t>(INT_MAX), "onnx",
            "{}: {} bytes, over protobuf's 2 GiB limit (such models keep their weights in external data)", path, size);
  onnx::ModelProto proto;
  VIT_CHECK(proto.ParseFromArray(data, static_cast<int>(size)), "onnx",
            "{}: not a valid ONNX model (the protobuf does not parse: truncated or not a ModelProto)", path);
  VIT_CHECK(proto.has_graph(), "onnx", "{}: the ModelProto has no graph", path);
  OnnxModel m;
  m.path = path;
  m.file_bytes = static_cast<int64_t>(size);
  m.ir_version = proto.ir_version();
  m.producer_name = proto.producer_name();
  m.producer_version = proto.producer_version();
  for (const auto& o : proto.opset_import()) {
    if (o.domain().empty() || o.domain() == "ai.onnx") m.opset = o.version();
  }
  for (const auto& p : proto.metadata_props()) m.metadata[p.key()] = p.value();
  const Reader r{path, base_dir};
  const onnx::GraphProto& g = proto.graph();
  VIT_CHECK(g.sparse_initializer_size() == 0, "onnx", "{}: the graph has sparse initializers, which vit does not read",
            path);
  for (const auto& init : g.initializer()) {
    m.constants.emplace_back(init.name(), r.tensor(init, fmt::format("initializer '{}'", printable(init.name()))));
  }
  for (int i = 0; i < g.node_size(); ++i) {
    OnnxNode node = r.node(g.node(i), static_cast<size_t>(i));
    if (node.op_type == "Constant" && node.domain.empty()) {
      const OnnxAttribute* value = node.attribute("value");
      VIT_CHECK(value != nullptr && value->kind == OnnxAttribute::Kind::Tensor && node.outputs.size() == 1, "onnx",
                "{}: {}: a Constant without a tensor 'value' (other forms are not read)", path, node.label);
      m.constants.emplace_back(node.outputs[0], value->t);
    }
    m.nodes.push_back(std::move(node));
  }
  for (const auto& v : g.input()) {
    if (m.constant(v.name()) == nullptr) m.inputs.push_back(r.value(v));
  }
  for (const auto& v : g.output()) m.outputs.push_back(r.value(v));
  return m;
}

OnnxModel read_onnx(const std::string& path) {
  const MappedFile file = map_file(path, "onnx");
  const std::string dir = std::filesystem::path(path).parent_path().string();
  return parse_onnx(file.data, file.size, path, dir.empty() ? "." : dir);
}

}  // namespace vit::io
