// Argument blocks the kernels take by value, and the codes of their operations: one
// header read by both sides, by the host as C++ (ops/*.cc) and by the device as OpenCL C
// (embedded before every program), so the two cannot disagree. Members are int and float
// only, which both languages lay out alike; indices fit in int (the host refuses larger
// tensors). Every buffer argument of a kernel comes with the offset of its first element
// in that buffer (ulong, elements).
#ifndef BULKHEAD_OPENCL_KERNELS_ARGS_H_
#define BULKHEAD_OPENCL_KERNELS_ARGS_H_

#define OCL_MAX_RANK 8
#define OCL_MAX_POST_OPS 6
#define OCL_TILE 64      /* outputs per work-group along rows and columns of a tiled product */
#define OCL_TILE_K 16    /* reduction depth staged in local memory per step */
#define OCL_GROUP 64     /* work-items of the kernels that reduce a row in a work-group */

/* Unary activations (elementwise.cl: unary). */
enum UnaryOp {
  UNARY_RELU, UNARY_LEAKY_RELU, UNARY_SIGMOID, UNARY_TANH, UNARY_EXP, UNARY_LOG, UNARY_SQRT,
  UNARY_ABS, UNARY_NEG, UNARY_CLIP, UNARY_HARD_SIGMOID, UNARY_HARD_SWISH, UNARY_ELU, UNARY_SELU,
  UNARY_ERF, UNARY_GELU, UNARY_GELU_TANH, UNARY_SOFTPLUS, UNARY_RECIPROCAL, UNARY_FLOOR, UNARY_CEIL
};

/* Broadcasting binary ops (elementwise.cl: binary). */
enum BinaryOp { BINARY_ADD, BINARY_SUB, BINARY_MUL, BINARY_DIV, BINARY_POW, BINARY_MAX, BINARY_MIN, BINARY_PRELU };

/* Conv post-ops the graph optimiser fuses (the `_post_ops` attribute), in its order. */
enum PostOpCode { POST_RELU, POST_LEAKY_RELU, POST_CLIP, POST_HARD_SIGMOID, POST_HARD_SWISH, POST_SIGMOID, POST_LINEAR, POST_SUM };

/* Reductions (reduce.cl: reduce). */
enum ReduceOp { REDUCE_SUM, REDUCE_MEAN, REDUCE_MAX, REDUCE_MIN, REDUCE_SUM_SQUARE, REDUCE_L1, REDUCE_L2, REDUCE_LOG_SUM_EXP };

/* y = a op b over `rank` dimensions of y; a and b are read through element strides that
 * are 0 along broadcast dimensions. */
typedef struct {
  int rank;
  int dims[OCL_MAX_RANK];
  int a[OCL_MAX_RANK];
  int b[OCL_MAX_RANK];
} Broadcast;

/* A box of `dims` elements read at src . c and written at dst . c (strides in elements;
 * source strides may be negative, for Slice with negative steps). */
typedef struct {
  int rank;
  int dims[OCL_MAX_RANK];
  int src[OCL_MAX_RANK];
  int dst[OCL_MAX_RANK];
} Box;

/* The geometry of a 2-D convolution, NCHW (1-D runs as H = 1): input channels and plane,
 * output plane, kernel, strides, leading pads (negative for a ConvTranspose whose
 * output_shape asks for more than its natural size), dilations, input and output channels
 * per group, batch. */
typedef struct {
  int c, h, w, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw, cg, mg, n;
} ConvGeo;

/* Post-ops applied to a convolution's output: codes[i] with args[2i], args[2i + 1]. */
typedef struct {
  int count;
  int codes[OCL_MAX_POST_OPS];
  float args[2 * OCL_MAX_POST_OPS];
} PostOps;

/* y[batch] = alpha * A[batch] x B[batch] + beta * C, operands read through strides:
 * A(row, k) = a[a_rs * row + a_cs * k], B(k, col) = b[b_rs * k + b_cs * col], C(row, col) =
 * c[c_rs * row + c_cs * col]; the batch index decomposes over `dims` with batch strides
 * a_bs and b_bs (0 where broadcast). */
typedef struct {
  int m, n, k;
  int a_rs, a_cs, b_rs, b_cs, c_rs, c_cs, has_c;
  float alpha, beta;
  int rank;
  int dims[4];
  int a_bs[4];
  int b_bs[4];
} Gemm;

/* MaxPool (kind 0) / AveragePool (kind 1) over a 2-D plane (1-D as H = 1): pads before
 * (ph, pw) and after (peh, pew). */
typedef struct {
  int h, w, oh, ow, kh, kw, sh, sw, ph, pw, peh, pew, dh, dw, kind, count_include_pad;
} Pool;

/* A reduction: each output element is a point of the kept dimensions (input strides
 * `kept`); its `count` inputs are the points of the reduced dimensions (strides `red`). */
typedef struct {
  int kept_rank;
  int kept_dims[OCL_MAX_RANK];
  int kept[OCL_MAX_RANK];
  int red_rank;
  int red_dims[OCL_MAX_RANK];
  int red[OCL_MAX_RANK];
  int count;
  int op;
} Reduce;

/* Pad: output `dims`; per axis the input extent after negative pads (`crop`), the pads
 * before, and the input strides; mode 0 constant, 1 reflect, 2 edge, 3 wrap. */
typedef struct {
  int rank;
  int dims[OCL_MAX_RANK];
  int crop[OCL_MAX_RANK];
  int before[OCL_MAX_RANK];
  int stride[OCL_MAX_RANK];
  int mode;
} Pad;

/* Nearest Resize as a gather: per output axis d, table[at[d] + c] is the input coordinate
 * of output coordinate c; in[d] the input strides. */
typedef struct {
  int rank;
  int dims[OCL_MAX_RANK];
  int in[OCL_MAX_RANK];
  int at[OCL_MAX_RANK];
} NearestMap;

#endif  /* BULKHEAD_OPENCL_KERNELS_ARGS_H_ */
