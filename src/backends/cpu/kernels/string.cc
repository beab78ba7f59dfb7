// Text operators: StringNormalizer, StringConcat, StringSplit, RegexFullMatch (RE2), TfIdfVectorizer.
#include <algorithm>
#include <cctype>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include <re2/re2.h>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/cpu_util.h"

namespace bulkhead::cpu {
namespace {

std::string lowered(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}
std::string uppered(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

Result<std::unique_ptr<Kernel>> make_string_normalizer(const KernelInfo& info) {
  const ir::Node& n = info.node;
  std::string action = n.attr_string("case_change_action", "NONE");
  if (action != "NONE" && action != "LOWER" && action != "UPPER")
    return invalid_argument(info.where() + "case_change_action must be NONE, LOWER or UPPER, got '" + action + "'");
  bool case_sensitive = n.attr_int("is_case_sensitive", 0) != 0;
  std::unordered_set<std::string> stop;
  for (const auto& w : n.attr_strings("stopwords")) stop.insert(case_sensitive ? w : lowered(w));
  return make_kernel([action, case_sensitive, stop](KernelContext& ctx) -> Status {
    const Tensor* x = ctx.input(0);
    if (!x || x->dtype() != DataType::kString) return invalid_argument(ctx.where() + "input must be a string tensor");
    const Shape& s = x->shape();
    if (!(s.size() == 1 || (s.size() == 2 && s[0] == 1)))
      return invalid_argument(ctx.where() + "input must have shape [C] or [1,C], got " + shape_to_string(s));
    std::vector<std::string> kept;
    for (int64_t i = 0; i < x->numel(); ++i) {
      const std::string& v = x->strings()[i];
      if (stop.count(case_sensitive ? v : lowered(v))) continue;
      kept.push_back(action == "LOWER" ? lowered(v) : action == "UPPER" ? uppered(v) : v);
    }
    // An input whose every string is a stop word gives one empty string.
    if (kept.empty()) kept.emplace_back();
    Shape out = s.size() == 1 ? Shape{static_cast<int64_t>(kept.size())} : Shape{1, static_cast<int64_t>(kept.size())};
    BH_ASSIGN_OR_RETURN(Tensor y, ctx.allocate_output(0, DataType::kString, out));
    std::copy(kept.begin(), kept.end(), y.strings());
    return Status::ok();
  });
}

// StringConcat (opset 20): X + Y element-wise, with NumPy broadcasting.
Status string_concat(KernelContext& ctx) {
  const Tensor *a = ctx.input(0), *b = ctx.input(1);
  if (!a || !b || a->dtype() != DataType::kString || b->dtype() != DataType::kString)
    return invalid_argument(ctx.where() + "both inputs must be string tensors");
  BH_ASSIGN_OR_RETURN(Shape out, broadcast_shapes(a->shape(), b->shape(), ctx.where()));
  BH_ASSIGN_OR_RETURN(Tensor y, ctx.allocate_output(0, DataType::kString, out));
  const auto sa = broadcast_strides(a->shape(), out), sb = broadcast_strides(b->shape(), out);
  const int r = static_cast<int>(out.size());
  std::vector<int64_t> idx(r, 0);
  for (int64_t o = 0; o < y.numel(); ++o) {
    int64_t ia = 0, ib = 0;
    for (int d = 0; d < r; ++d) ia += idx[d] * sa[d], ib += idx[d] * sb[d];
    y.strings()[o] = a->strings()[ia] + b->strings()[ib];
    for (int d = r - 1; d >= 0 && ++idx[d] == out[d]; --d) idx[d] = 0;
  }
  return Status::ok();
}

// StringSplit (opset 20): Python's str.split. Without a delimiter (or with an empty one)
// runs of whitespace separate and no empty strings result; with one, every occurrence
// separates. At most `maxsplit` splits. Y is X's shape plus the most substrings any element
// gave, padded with empty strings; Z counts each element's substrings.
std::vector<std::string> split_one(const std::string& s, const std::string& delim, int64_t maxsplit) {
  std::vector<std::string> parts;
  if (delim.empty()) {
    size_t i = 0;
    auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; };
    while (true) {
      while (i < s.size() && space(s[i])) ++i;
      if (i == s.size()) break;
      if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
        size_t e = s.size();
        while (e > i && space(s[e - 1])) --e;
        parts.push_back(s.substr(i, e - i));
        break;
      }
      size_t j = i;
      while (j < s.size() && !space(s[j])) ++j;
      parts.push_back(s.substr(i, j - i));
      i = j;
    }
    return parts;
  }
  size_t i = 0;
  while (true) {
    size_t j = maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit ? std::string::npos : s.find(delim, i);
    if (j == std::string::npos) {
      parts.push_back(s.substr(i));
      break;
    }
    parts.push_back(s.substr(i, j - i));
    i = j + delim.size();
  }
  return parts;
}

Status string_split(KernelContext& ctx, const std::string& delim, int64_t maxsplit) {
  const Tensor* x = ctx.input(0);
  if (!x || x->dtype() != DataType::kString) return invalid_argument(ctx.where() + "input must be a string tensor");
  const int64_t n = x->numel();
  std::vector<std::vector<std::string>> parts(static_cast<size_t>(n));
  int64_t widest = 0;
  for (int64_t i = 0; i < n; ++i) {
    parts[i] = split_one(x->strings()[i], delim, maxsplit);
    widest = std::max<int64_t>(widest, static_cast<int64_t>(parts[i].size()));
  }
  Shape ys = x->shape();
  ys.push_back(widest);
  BH_ASSIGN_OR_RETURN(Tensor y, ctx.allocate_output(0, DataType::kString, ys));
  BH_ASSIGN_OR_RETURN(Tensor z, ctx.allocate_output(1, DataType::kInt64, x->shape()));
  for (int64_t i = 0; i < n; ++i) {
    for (size_t k = 0; k < parts[i].size(); ++k) y.strings()[i * widest + static_cast<int64_t>(k)] = std::move(parts[i][k]);
    z.data<int64_t>()[i] = static_cast<int64_t>(parts[i].size());
  }
  return Status::ok();
}

// TfIdfVectorizer (opset 9): counts the pool's n-grams (min_gram_length..max_gram_length
// items, taken every 1..max_skip_count+1 positions) in each row of X and weighs them (TF:
// the counts, IDF: the weight where the count is non-zero, TFIDF: count x weight). Unigrams
// are counted once, not once per skip distance.
struct TfIdf {
  int64_t min_n = 1, max_n = 1, max_skip = 0, width = 0;
  enum class Mode { kTF, kIDF, kTFIDF } mode = Mode::kTF;
  bool strings = false;
  std::map<std::vector<int64_t>, int64_t> ngrams;  // n-gram (item ids) -> output index
  std::unordered_map<std::string, int64_t> string_ids;
  std::vector<float> weights;  // per output index; empty: 1
};

Result<std::unique_ptr<Kernel>> make_tfidf(const KernelInfo& info) {
  const ir::Node& n = info.node;
  auto t = std::make_shared<TfIdf>();
  t->min_n = n.attr_int("min_gram_length", 1);
  t->max_n = n.attr_int("max_gram_length", 1);
  t->max_skip = n.attr_int("max_skip_count", 0);
  if (t->min_n < 1 || t->max_n < t->min_n || t->max_skip < 0 || t->max_n > 64 || t->max_skip > 1024)
    return invalid_argument(info.where() + "needs 1 <= min_gram_length <= max_gram_length <= 64 and 0 <= max_skip_count <= 1024");
  const std::string mode = n.attr_string("mode", "TF");
  if (mode == "TF") t->mode = TfIdf::Mode::kTF;
  else if (mode == "IDF") t->mode = TfIdf::Mode::kIDF;
  else if (mode == "TFIDF") t->mode = TfIdf::Mode::kTFIDF;
  else return invalid_argument(info.where() + "mode must be TF, IDF or TFIDF, got '" + mode + "'");
  const auto counts = n.attr_ints("ngram_counts");
  const auto indexes = n.attr_ints("ngram_indexes");
  const auto pool_ints = n.attr_ints("pool_int64s");
  const auto pool_strings = n.attr_strings("pool_strings");
  if (!pool_ints.empty() && !pool_strings.empty())
    return invalid_argument(info.where() + "has both pool_int64s and pool_strings");
  t->strings = !pool_strings.empty();
  std::vector<int64_t> pool = pool_ints;
  if (t->strings)
    for (const auto& s : pool_strings) {
      auto it = t->string_ids.emplace(s, static_cast<int64_t>(t->string_ids.size())).first;
      pool.push_back(it->second);
    }
  const int64_t psize = static_cast<int64_t>(pool.size());
  size_t next = 0;
  for (size_t g = 0; g < counts.size(); ++g) {
    const int64_t len = static_cast<int64_t>(g) + 1;
    const int64_t b = counts[g], e = g + 1 < counts.size() ? counts[g + 1] : psize;
    if (b < 0 || e < b || e > psize || (e - b) % len != 0)
      return invalid_argument(info.where() + "ngram_counts " + std::to_string(b) + ".." + std::to_string(e) +
                              " do not split the pool into " + std::to_string(len) + "-grams");
    for (int64_t p = b; p < e; p += len, ++next) {
      if (next >= indexes.size()) return invalid_argument(info.where() + "ngram_indexes has fewer entries than the pool has n-grams");
      if (indexes[next] < 0 || indexes[next] > (int64_t{1} << 31))
        return invalid_argument(info.where() + "ngram_indexes holds " + std::to_string(indexes[next]));
      t->ngrams[std::vector<int64_t>(pool.begin() + p, pool.begin() + p + len)] = indexes[next];
      t->width = std::max(t->width, indexes[next] + 1);
    }
  }
  if (next != indexes.size()) return invalid_argument(info.where() + "ngram_indexes has more entries than the pool has n-grams");
  for (float w : n.attr_floats("weights")) t->weights.push_back(w);
  if (!t->weights.empty() && static_cast<int64_t>(t->weights.size()) < t->width)
    return invalid_argument(info.where() + "weights has " + std::to_string(t->weights.size()) + " values for " +
                            std::to_string(t->width) + " outputs");
  return make_kernel([t](KernelContext& ctx) -> Status {
    const Tensor* x = ctx.input(0);
    if (!x) return invalid_argument(ctx.where() + "missing input X");
    const bool sx = x->dtype() == DataType::kString;
    if (sx != t->strings || (!sx && x->dtype() != DataType::kInt32 && x->dtype() != DataType::kInt64))
      return invalid_argument(ctx.where() + "X is " + dtype_name(x->dtype()) + ", the pool holds " + (t->strings ? "strings" : "integers"));
    if (x->rank() != 1 && x->rank() != 2) return invalid_argument(ctx.where() + "X must be [C] or [N, C], got " + x->describe());
    const int64_t rows = x->rank() == 2 ? x->dim(0) : 1, cols = x->dim(-1);
    std::vector<int64_t> items(static_cast<size_t>(x->numel()));
    for (int64_t i = 0; i < x->numel(); ++i) {
      if (sx) {
        auto it = t->string_ids.find(x->strings()[i]);
        items[i] = it == t->string_ids.end() ? -1 : it->second;  // -1 matches nothing
      } else {
        items[i] = x->dtype() == DataType::kInt32 ? x->data<int32_t>()[i] : x->data<int64_t>()[i];
        if (t->strings) items[i] = -1;
      }
    }
    Shape ys = x->rank() == 2 ? Shape{rows, t->width} : Shape{t->width};
    BH_ASSIGN_OR_RETURN(Tensor y, ctx.allocate_output(0, DataType::kFloat32, ys));
    float* yp = y.data<float>();
    std::fill(yp, yp + y.numel(), 0.0f);
    std::vector<int64_t> key;
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t* row = items.data() + r * cols;
      float* out = yp + r * t->width;
      int64_t first = t->min_n;
      for (int64_t d = 1; d <= t->max_skip + 1; ++d) {
        for (int64_t start = 0; start < cols; ++start) {
          key.clear();
          for (int64_t len = 1, pos = start; len <= t->max_n && pos < cols; ++len, pos += d) {
            key.push_back(row[pos]);
            if (len < first) continue;
            auto it = t->ngrams.find(key);
            if (it != t->ngrams.end()) out[it->second] += 1.0f;
          }
        }
        if (first == 1 && ++first > t->max_n) break;  // unigrams do not depend on the skip
      }
      for (int64_t k = 0; k < t->width; ++k) {
        const float w = t->weights.empty() ? 1.0f : t->weights[k];
        if (t->mode == TfIdf::Mode::kIDF) out[k] = out[k] > 0 ? w : 0.0f;
        else if (t->mode == TfIdf::Mode::kTFIDF) out[k] *= w;
      }
    }
    return Status::ok();
  });
}

// RegexFullMatch (opset 20): whether each string matches `pattern` as a whole, with RE2's
// syntax (which ONNX names); the pattern is compiled once, at session creation.
Result<std::unique_ptr<Kernel>> make_regex_full_match(const KernelInfo& info) {
  const ir::Attribute* a = info.node.attr("pattern");
  if (!a || a->type != ir::AttrType::kString) return invalid_model(info.where() + "needs a string attribute 'pattern'");
  RE2::Options opt;
  opt.set_log_errors(false);
  auto re = std::make_shared<RE2>(a->s, opt);
  if (!re->ok()) return invalid_argument(info.where() + "pattern '" + a->s + "' is not a valid RE2 expression: " + re->error());
  return make_kernel([re](KernelContext& ctx) -> Status {
    const Tensor* x = ctx.input(0);
    if (!x || x->dtype() != DataType::kString) return invalid_argument(ctx.where() + "input must be a string tensor");
    BH_ASSIGN_OR_RETURN(Tensor y, ctx.allocate_output(0, DataType::kBool, x->shape()));
    for (int64_t i = 0; i < x->numel(); ++i) y.data<uint8_t>()[i] = RE2::FullMatch(x->strings()[i], *re) ? 1 : 0;
    return Status::ok();
  });
}

}  // namespace

void register_string_kernels(KernelTable& t) {
  t.add("StringNormalizer", 10, make_string_normalizer);
  t.add("StringConcat", 20, [](const KernelInfo&) -> Result<std::unique_ptr<Kernel>> { return make_kernel(string_concat); });
  t.add("StringSplit", 20, [](const KernelInfo& info) -> Result<std::unique_ptr<Kernel>> {
    const std::string delim = info.node.attr_string("delimiter", "");
    const int64_t maxsplit = info.node.has_attr("maxsplit") ? info.node.attr_int("maxsplit", -1) : -1;
    if (info.node.has_attr("maxsplit") && maxsplit < 0)
      return invalid_argument(info.where() + "maxsplit must be >= 0, got " + std::to_string(maxsplit));
    return make_kernel([delim, maxsplit](KernelContext& ctx) { return string_split(ctx, delim, maxsplit); });
  });
  t.add("TfIdfVectorizer", 9, make_tfidf);
  t.add("RegexFullMatch", 20, make_regex_full_match);
}

}  // namespace bulkhead::cpu
