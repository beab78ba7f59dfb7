// QLinearEltwise, an internal operator (domain "bulkhead"): the element-wise float ops of a
// QDQ model between DequantizeLinear inputs and a QuantizeLinear, as one node. Made by
// exec/qdq_eltwise.h, run by the CPU backend (kernels/quant_eltwise.cc).
//
// QLinearEltwise(X1..Xn: uint8/int8, numpy-broadcast) -> Y: uint8/int8, attributes:
//   _x_scales (floats), _x_zero_points (ints): each input's dequantisation;
//   _x_registers (ints): the register each input is dequantised into;
//   _y_scale (float), _y_zero_point (int), _y_type (int, a DataType): the quantisation;
//   _code (ints): quadruples [op, dst, a, b] over float registers, in order; an operand
//   < 0 names constant -(operand + 1) of _consts;
//   _consts (floats); _result (int): the register quantised into Y.
// Ops (QLinearEltwiseOp): add, sub, mul, div, max, min (a, b), relu (a), clip (a; lo, hi
// the constants b and b + 1), hardswish (a), hardsigmoid (a; alpha, beta the constants b
// and b + 1), sigmoid, tanh (a), leakyrelu (a; alpha the constant b).
#pragma once

#include <cstdint>

namespace bulkhead {

enum class QLinearEltwiseOp : int64_t {
  kAdd = 1,
  kSub = 2,
  kMul = 3,
  kDiv = 4,
  kMax = 5,
  kMin = 6,
  kRelu = 7,
  kClip = 8,
  kHardSwish = 9,
  kHardSigmoid = 10,
  kSigmoid = 11,
  kTanh = 12,
  kLeakyRelu = 13,
};

inline constexpr int kQLinearEltwiseMaxInputs = 4;
inline constexpr int kQLinearEltwiseMaxRegisters = 32;

}  // namespace bulkhead
