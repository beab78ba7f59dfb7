// Registration entry points of the CPU backend's kernel families. Each family lives in
// its own file under kernels/ and adds its factories to the backend's KernelTable when
// the CPU backend is created. No static registration: the table belongs to the backend.
#pragma once

#include "backend/kernel.h"

namespace bulkhead::cpu {

void register_elementwise_kernels(KernelTable& t);    // unary/binary maths, activations, logic, Cast, Where, Clip
void register_tensor_kernels(KernelTable& t);         // shape, layout, indexing, Resize, Pad, Constant*
void register_dnnl_kernels(KernelTable& t);           // Conv, ConvTranspose, MatMul, Gemm, pooling, BatchNormalization
void register_reduction_kernels(KernelTable& t);      // Reduce*, ArgMax/Min, Softmax family, normalisations
void register_control_flow_kernels(KernelTable& t);   // If, Loop, Scan, sequence and optional ops
void register_recurrent_kernels(KernelTable& t);      // LSTM, GRU, RNN
void register_misc_kernels(KernelTable& t);           // TopK, CumSum, Einsum, Attention, ...
void register_quantize_kernels(KernelTable& t);       // QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear
void register_signal_kernels(KernelTable& t);         // DFT, STFT (FFTW)
void register_image_kernels(KernelTable& t);          // ImageDecoder (libjpeg, libpng, libtiff, libwebp, OpenJPEG)
void register_ml_kernels(KernelTable& t);             // ai.onnx.ml LabelEncoder
void register_sequence_attention_kernels(KernelTable& t);  // LinearAttention, CausalConvWithState, FlexAttention
void register_roi_training_kernels(KernelTable& t);   // RoiAlign; ai.onnx.preview.training Adagrad, Adam, Momentum
void register_string_kernels(KernelTable& t);

// Work too small to share between threads runs on one (kernels/serial_small.cc).
// serial_when_small puts the policy around the kernel `factory` makes for `op_type`: a
// call of a memory-bound operator (element-wise, data movement, global pooling, normalisation,
// layout conversion) whose inputs total less than kSerialInputBytes runs on one thread.
// A convolution asks serial_for_macs. BULKHEAD_CPU_SERIAL_BYTES=N sets the byte bound
// (0: the policy is off, both parts and the session rule of exec/work.h), to compare.
inline constexpr int64_t kSerialInputBytes = int64_t{1} << 20;
inline constexpr int64_t kSerialConvMacs = int64_t{2} << 20;
KernelFactory serial_when_small(const std::string& op_type, KernelFactory factory);
bool serial_for_macs(double macs);  // a double: a hostile shape's product may not fit in int64

// The hardware that makes bfloat16 convolutions and products fast on this CPU ("AMX",
// "AVX512-BF16"), or "" (DeviceInfo::bf16_units). kernels/precision.cc.
std::string bf16_units();         // StringNormalizer

}  // namespace bulkhead::cpu
