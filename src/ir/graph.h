// Graph IR: what an ONNX model becomes after import. Immutable once a Session is built
// from it, so compiled sessions may share it across threads.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "bulkhead/dtype.h"
#include "bulkhead/status.h"
#include "bulkhead/tensor.h"

namespace bulkhead::ir {

struct Graph;

// One dimension of a declared shape: a fixed size, a symbolic name, or unknown.
struct Dim {
  int64_t value = -1;  // >= 0 when fixed
  std::string param;   // symbolic name, when given
  bool fixed() const { return value >= 0; }
};

enum class ValueType { kTensor, kSequence, kOptional, kUnknown };

// Declared type of a graph input, output or intermediate value.
struct ValueInfo {
  std::string name;
  ValueType type = ValueType::kTensor;
  DataType dtype = DataType::kUndefined;  // element type (of the tensor, sequence or optional)
  std::optional<std::vector<Dim>> shape;  // nullopt when the rank is unknown
  ValueType optional_elem = ValueType::kTensor;  // for kOptional: tensor or sequence
  std::string type_string() const;               // "float32[1,3,N,N]"
};

enum class AttrType { kUndefined, kFloat, kInt, kString, kTensor, kGraph, kFloats, kInts, kStrings, kTensors, kGraphs, kType, kTypes };

struct Attribute {
  AttrType type = AttrType::kUndefined;
  float f = 0;
  int64_t i = 0;
  std::string s;
  Tensor t;
  std::shared_ptr<const Graph> g;
  std::vector<float> floats;
  std::vector<int64_t> ints;
  std::vector<std::string> strings;
  std::vector<Tensor> tensors;
  std::vector<std::shared_ptr<const Graph>> graphs;
  std::vector<ValueInfo> types;  // kType (one entry) and kTypes
};

struct Node {
  std::string name;     // may be empty in the file; import gives it "<op>_<index>"
  std::string op_type;
  std::string domain;   // "" is the default ONNX domain ("ai.onnx" is normalised to "")
  int opset = 0;        // the model's opset version for `domain`
  std::vector<std::string> inputs;   // "" marks an omitted optional input
  std::vector<std::string> outputs;  // "" marks an unused optional output
  std::map<std::string, Attribute> attrs;

  const Attribute* attr(const std::string& n) const {
    auto it = attrs.find(n);
    return it == attrs.end() ? nullptr : &it->second;
  }
  bool has_attr(const std::string& n) const { return attrs.count(n) != 0; }
  int64_t attr_int(const std::string& n, int64_t def) const;
  float attr_float(const std::string& n, float def) const;
  std::string attr_string(const std::string& n, const std::string& def) const;
  std::vector<int64_t> attr_ints(const std::string& n, std::vector<int64_t> def = {}) const;
  std::vector<float> attr_floats(const std::string& n, std::vector<float> def = {}) const;
  std::vector<std::string> attr_strings(const std::string& n) const;
  // "node 'conv_3' (Conv)" for error messages.
  std::string label() const;
};

struct Graph {
  std::string name;
  std::vector<Node> nodes;  // topologically sorted by import
  std::vector<ValueInfo> inputs;   // every declared input, including ones with initializers
  std::vector<ValueInfo> outputs;
  std::unordered_map<std::string, Tensor> initializers;
  std::unordered_map<std::string, ValueInfo> value_info;  // inferred or declared intermediates
  // Names this graph reads from enclosing graphs (for subgraphs), in first-use order.
  std::vector<std::string> outer_refs;

  const ValueInfo* find_input(const std::string& n) const;
  const ValueInfo* info(const std::string& n) const;  // input, output or intermediate
  // Removes the nodes whose entry in `dead` (one per node) is true, keeping the order of
  // the others.
  void remove_nodes(const std::vector<bool>& dead);

  // Whether every shape in the graph is known before it runs, from the declared and
  // inferred types (ir/infer.h, run at import): every tensor input has fixed dims (an
  // input with a default and no declared shape counts with the default's shape), and
  // every value a node produces, here and in subgraphs, is a tensor of known rank with
  // fixed dims. Symbolic dims ("N") are not static; nor are sequences and optionals.
  // Graph capture and memory planning rely on it.
  bool all_shapes_static() const;
};

struct Model {
  int64_t ir_version = 0;
  std::map<std::string, int> opsets;  // domain -> version ("" = default domain)
  std::string producer;
  std::string path;  // file it came from, for messages
  std::shared_ptr<Graph> graph;
};

}  // namespace bulkhead::ir
