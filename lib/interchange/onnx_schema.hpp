// Field numbers of the ONNX messages stoke writes and reads (onnx/onnx.proto3).
#pragma once

namespace stoke::interchange::onnx {

namespace model {  // ModelProto
inline constexpr int kIrVersion = 1, kProducerName = 2, kProducerVersion = 3, kDocString = 6,
                     kGraph = 7, kOpsetImport = 8, kMetadataProps = 14;
}
namespace opset {  // OperatorSetIdProto
inline constexpr int kDomain = 1, kVersion = 2;
}
namespace graph {  // GraphProto
inline constexpr int kNode = 1, kName = 2, kInitializer = 5, kInput = 11, kOutput = 12;
}
namespace node {  // NodeProto
inline constexpr int kInput = 1, kOutput = 2, kName = 3, kOpType = 4, kAttribute = 5, kDomain = 7;
}
namespace attr {  // AttributeProto and its AttributeType values
inline constexpr int kName = 1, kF = 2, kI = 3, kS = 4, kT = 5, kFloats = 7, kInts = 8, kType = 20;
inline constexpr int kTypeFloat = 1, kTypeInt = 2, kTypeString = 3, kTypeTensor = 4, kTypeInts = 7;
}  // namespace attr
namespace tensor {  // TensorProto and its DataType values
inline constexpr int kDims = 1, kDataType = 2, kFloatData = 4, kInt64Data = 7, kName = 8,
                     kRawData = 9, kDoubleData = 10, kDataLocation = 14;
inline constexpr int kFloat = 1, kInt64 = 7, kFloat16 = 10, kDouble = 11;
}  // namespace tensor
namespace value_info {  // ValueInfoProto, TypeProto, TypeProto.Tensor, TensorShapeProto(.Dimension)
inline constexpr int kName = 1, kType = 2;
inline constexpr int kTensorType = 1;
inline constexpr int kElemType = 1, kShape = 2;
inline constexpr int kDim = 1;
inline constexpr int kDimValue = 1, kDimParam = 2;
}  // namespace value_info
namespace entry {  // StringStringEntryProto
inline constexpr int kKey = 1, kValue = 2;
}

// ONNX IR version 7 is the one that introduced opset 13.
inline constexpr int kIrVersion = 7;

}  // namespace stoke::interchange::onnx
