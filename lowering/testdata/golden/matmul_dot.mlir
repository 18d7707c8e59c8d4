// callbox lowering of @matmul_dot: 3 ops; callbacks by content id:
//   matmul = cb1-181221c6257b069ef1432ce703a6fe936c873f04c02abe23702dd5aa87aa383e (a: f32[m,k], b: f32[k,n]) -> f32[m,n]
module @matmul_dot attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<2x3xf32>, %arg1: tensor<3x2xf32>) -> (tensor<2x2xf32>, tensor<2x2xf32>) {
    %0 = stablehlo.custom_call @callbox(%arg0, %arg1) {api_version = 4 : i32, backend_config = {callback = "cb1-181221c6257b069ef1432ce703a6fe936c873f04c02abe23702dd5aa87aa383e"}, operand_layouts = [dense<[1, 0]> : tensor<2xindex>, dense<[1, 0]> : tensor<2xindex>], result_layouts = [dense<[1, 0]> : tensor<2xindex>]} : (tensor<2x3xf32>, tensor<3x2xf32>) -> tensor<2x2xf32>
    %1 = "stablehlo.dot_general"(%arg0, %arg1) {dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]>} : (tensor<2x3xf32>, tensor<3x2xf32>) -> tensor<2x2xf32>
    %2 = "stablehlo.subtract"(%0, %1) : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
    "func.return"(%0, %2) : (tensor<2x2xf32>, tensor<2x2xf32>) -> ()
  }
}
