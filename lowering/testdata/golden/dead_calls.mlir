// callbox lowering of @dead_calls: 4 ops; callbacks by content id:
//   scale = cb1-5f7106526e89c6a230835f0d76cdc6de1cccf14ece7b8c150b1ca65542822518 (x: f32[n], factor: f32[]) -> f32[n]
//   tap_print = cb1-5fdf4bb264f72a2aaf7820208cc07846a07e259d71f471543b3f68bea9c87d32 (x: f32[n]) -> $x
module @dead_calls attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<8xf32>) -> (tensor<8xf32>) {
    %0 = stablehlo.constant dense<2.0e+00> : tensor<f32>
    %1 = stablehlo.custom_call @callbox(%arg0, %0) {api_version = 4 : i32, backend_config = {callback = "cb1-5f7106526e89c6a230835f0d76cdc6de1cccf14ece7b8c150b1ca65542822518"}, operand_layouts = [dense<0> : tensor<1xindex>, dense<> : tensor<0xindex>], result_layouts = [dense<0> : tensor<1xindex>]} : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
    %2 = "stablehlo.add"(%1, %1) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
    %3 = stablehlo.custom_call @callbox(%2) {api_version = 4 : i32, has_side_effect = true, backend_config = {callback = "cb1-5fdf4bb264f72a2aaf7820208cc07846a07e259d71f471543b3f68bea9c87d32"}, operand_layouts = [dense<0> : tensor<1xindex>], result_layouts = [dense<0> : tensor<1xindex>]} : (tensor<8xf32>) -> tensor<8xf32>
    "func.return"(%2) : (tensor<8xf32>) -> ()
  }
}
