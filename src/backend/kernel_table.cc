#include "backend/kernel.h"

namespace bulkhead {

void KernelTable::add(const std::string& op_type, int since_version, KernelFactory factory, const std::string& domain) {
  table_[domain + "::" + op_type][since_version] = std::move(factory);
}

void KernelTable::wrap_all(const std::function<KernelFactory(const std::string& op_type, KernelFactory)>& wrap) {
  for (auto& [key, versions] : table_) {
    const std::string op_type = key.substr(key.find("::") + 2);
    for (auto& [since, factory] : versions) factory = wrap(op_type, std::move(factory));
  }
}

const KernelFactory* KernelTable::find(const std::string& domain, const std::string& op_type, int opset) const {
  auto it = table_.find(domain + "::" + op_type);
  if (it == table_.end()) return nullptr;
  // Largest since_version <= opset; models that import an older opset than our first
  // registration still get the oldest kernel (the semantics rarely changed downward).
  auto& versions = it->second;
  auto v = versions.upper_bound(opset);
  if (v == versions.begin()) return &v->second;
  return &std::prev(v)->second;
}

bool KernelTable::has_op(const std::string& domain, const std::string& op_type) const {
  return table_.count(domain + "::" + op_type) != 0;
}

std::vector<std::string> KernelTable::op_names() const {
  std::vector<std::string> r;
  for (auto& [k, v] : table_) r.push_back(k.substr(0, 2) == "::" ? k.substr(2) : k);
  return r;
}

}  // namespace bulkhead
