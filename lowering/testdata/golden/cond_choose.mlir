// callbox lowering of @cond_choose: 11 ops; callbacks by content id:
//   scale = cb1-5f7106526e89c6a230835f0d76cdc6de1cccf14ece7b8c150b1ca65542822518 (x: f32[n], factor: f32[]) -> f32[n]
//   softmax = cb1-fc77f091017a4744a867d71d2cf42e8e157f9516d7f8fc501baaa206a03b3cba (x: f32[b,n]) -> f32[b,n]
//   tap_print = cb1-5fdf4bb264f72a2aaf7820208cc07846a07e259d71f471543b3f68bea9c87d32 (x: f32[n]) -> $x
module @cond_choose attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<2x4xf32>) -> (tensor<2x4xf32>) {
    %0 = "stablehlo.after_all"() : () -> !stablehlo.token
    %1 = stablehlo.constant dense<0.0e+00> : tensor<f32>
    %2 = "stablehlo.reduce"(%arg0, %1) ({
    ^bb0(%3: tensor<f32>, %4: tensor<f32>):
      %5 = "stablehlo.add"(%3, %4) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "stablehlo.return"(%5) : (tensor<f32>) -> ()
    }) {dimensions = array<i64: 0, 1>} : (tensor<2x4xf32>, tensor<f32>) -> tensor<f32>
    %6 = stablehlo.constant dense<0.0e+00> : tensor<f32>
    %7 = "stablehlo.compare"(%2, %6) {comparison_direction = #stablehlo<comparison_direction GT>} : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %8:2 = "stablehlo.if"(%7) ({
      %9 = stablehlo.custom_call @callbox(%arg0) {api_version = 4 : i32, backend_config = {callback = "cb1-fc77f091017a4744a867d71d2cf42e8e157f9516d7f8fc501baaa206a03b3cba"}, operand_layouts = [dense<[1, 0]> : tensor<2xindex>], result_layouts = [dense<[1, 0]> : tensor<2xindex>]} : (tensor<2x4xf32>) -> tensor<2x4xf32>
      "stablehlo.return"(%9, %0) : (tensor<2x4xf32>, !stablehlo.token) -> ()
    }, {
      %10 = "stablehlo.reshape"(%arg0) : (tensor<2x4xf32>) -> tensor<8xf32>
      %11:2 = stablehlo.custom_call @callbox(%10, %0) {api_version = 4 : i32, has_side_effect = true, backend_config = {callback = "cb1-5fdf4bb264f72a2aaf7820208cc07846a07e259d71f471543b3f68bea9c87d32", chain = "main"}, operand_layouts = [dense<0> : tensor<1xindex>, dense<> : tensor<0xindex>], result_layouts = [dense<0> : tensor<1xindex>, dense<> : tensor<0xindex>]} : (tensor<8xf32>, !stablehlo.token) -> (tensor<8xf32>, !stablehlo.token)
      %12 = stablehlo.constant dense<-1.0e+00> : tensor<f32>
      %13 = stablehlo.custom_call @callbox(%10, %12) {api_version = 4 : i32, backend_config = {callback = "cb1-5f7106526e89c6a230835f0d76cdc6de1cccf14ece7b8c150b1ca65542822518"}, operand_layouts = [dense<0> : tensor<1xindex>, dense<> : tensor<0xindex>], result_layouts = [dense<0> : tensor<1xindex>]} : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
      %14 = "stablehlo.reshape"(%13) : (tensor<8xf32>) -> tensor<2x4xf32>
      "stablehlo.return"(%14, %11#1) : (tensor<2x4xf32>, !stablehlo.token) -> ()
    }) : (tensor<i1>) -> (tensor<2x4xf32>, !stablehlo.token)
    "func.return"(%8#0) : (tensor<2x4xf32>) -> ()
  }
}
