// callbox lowering of @pipeline: 8 ops; callbacks by content id:
//   scale = cb1-5f7106526e89c6a230835f0d76cdc6de1cccf14ece7b8c150b1ca65542822518 (x: f32[n], factor: f32[]) -> f32[n]
//   softmax = cb1-fc77f091017a4744a867d71d2cf42e8e157f9516d7f8fc501baaa206a03b3cba (x: f32[b,n]) -> f32[b,n]
//   tap_print = cb1-5fdf4bb264f72a2aaf7820208cc07846a07e259d71f471543b3f68bea9c87d32 (x: f32[n]) -> $x
module @pipeline attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<4x8xf32>, %arg1: tensor<f32>) -> (tensor<4x8xf32>, tensor<4xf32>) {
    %0 = "stablehlo.reshape"(%arg0) : (tensor<4x8xf32>) -> tensor<32xf32>
    %1 = stablehlo.custom_call @callbox(%0, %arg1) {api_version = 4 : i32, backend_config = {callback = "cb1-5f7106526e89c6a230835f0d76cdc6de1cccf14ece7b8c150b1ca65542822518"}, operand_layouts = [dense<0> : tensor<1xindex>, dense<> : tensor<0xindex>], result_layouts = [dense<0> : tensor<1xindex>]} : (tensor<32xf32>, tensor<f32>) -> tensor<32xf32>
    %2 = stablehlo.custom_call @callbox(%1) {api_version = 4 : i32, has_side_effect = true, backend_config = {callback = "cb1-5fdf4bb264f72a2aaf7820208cc07846a07e259d71f471543b3f68bea9c87d32"}, operand_layouts = [dense<0> : tensor<1xindex>], result_layouts = [dense<0> : tensor<1xindex>]} : (tensor<32xf32>) -> tensor<32xf32>
    %3 = "stablehlo.reshape"(%1) : (tensor<32xf32>) -> tensor<4x8xf32>
    %4 = stablehlo.custom_call @callbox(%3) {api_version = 4 : i32, backend_config = {callback = "cb1-fc77f091017a4744a867d71d2cf42e8e157f9516d7f8fc501baaa206a03b3cba"}, operand_layouts = [dense<[1, 0]> : tensor<2xindex>], result_layouts = [dense<[1, 0]> : tensor<2xindex>]} : (tensor<4x8xf32>) -> tensor<4x8xf32>
    %5 = "stablehlo.reshape"(%4) : (tensor<4x8xf32>) -> tensor<32xf32>
    %6 = stablehlo.custom_call @callbox(%5) {api_version = 4 : i32, has_side_effect = true, backend_config = {callback = "cb1-5fdf4bb264f72a2aaf7820208cc07846a07e259d71f471543b3f68bea9c87d32"}, operand_layouts = [dense<0> : tensor<1xindex>], result_layouts = [dense<0> : tensor<1xindex>]} : (tensor<32xf32>) -> tensor<32xf32>
    %7 = stablehlo.constant dense<0.0e+00> : tensor<f32>
    %8 = "stablehlo.reduce"(%4, %7) ({
    ^bb0(%9: tensor<f32>, %10: tensor<f32>):
      %11 = "stablehlo.add"(%9, %10) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "stablehlo.return"(%11) : (tensor<f32>) -> ()
    }) {dimensions = array<i64: 1>} : (tensor<4x8xf32>, tensor<f32>) -> tensor<4xf32>
    "func.return"(%4, %8) : (tensor<4x8xf32>, tensor<4xf32>) -> ()
  }
}
