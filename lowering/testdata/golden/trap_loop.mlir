// callbox lowering of @trap_loop: 11 ops; callbacks by content id:
//   checked = cb1-62ad52eae47751ab9b6d54af8e200f5cb4b5fa8655b12855f9db0c25ba232e8f (x: f32[n]) -> f32[n]
//   tap_print = cb1-5fdf4bb264f72a2aaf7820208cc07846a07e259d71f471543b3f68bea9c87d32 (x: f32[n]) -> $x
module @trap_loop attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<4xf32>) -> (tensor<4xf32>) {
    %0 = "stablehlo.after_all"() : () -> !stablehlo.token
    %1 = stablehlo.constant dense<0> : tensor<i32>
    %2 = stablehlo.constant dense<1> : tensor<i32>
    %3 = stablehlo.constant dense<5> : tensor<i32>
    %4 = stablehlo.constant dense<1.0e+00> : tensor<4xf32>
    %5:6 = "stablehlo.while"(%1, %arg0, %0, %3, %4, %2) ({
    ^bb0(%6: tensor<i32>, %7: tensor<4xf32>, %8: !stablehlo.token, %9: tensor<i32>, %10: tensor<4xf32>, %11: tensor<i32>):
      %12 = "stablehlo.compare"(%6, %9) {comparison_direction = #stablehlo<comparison_direction LT>} : (tensor<i32>, tensor<i32>) -> tensor<i1>
      "stablehlo.return"(%12) : (tensor<i1>) -> ()
    }, {
    ^bb0(%13: tensor<i32>, %14: tensor<4xf32>, %15: !stablehlo.token, %16: tensor<i32>, %17: tensor<4xf32>, %18: tensor<i32>):
      %19:2 = stablehlo.custom_call @callbox(%14, %15) {api_version = 4 : i32, has_side_effect = true, backend_config = {callback = "cb1-5fdf4bb264f72a2aaf7820208cc07846a07e259d71f471543b3f68bea9c87d32", chain = "main"}, operand_layouts = [dense<0> : tensor<1xindex>, dense<> : tensor<0xindex>], result_layouts = [dense<0> : tensor<1xindex>, dense<> : tensor<0xindex>]} : (tensor<4xf32>, !stablehlo.token) -> (tensor<4xf32>, !stablehlo.token)
      %20:2 = stablehlo.custom_call @callbox(%19#0, %19#1) {api_version = 4 : i32, has_side_effect = true, backend_config = {callback = "cb1-62ad52eae47751ab9b6d54af8e200f5cb4b5fa8655b12855f9db0c25ba232e8f", chain = "main"}, operand_layouts = [dense<0> : tensor<1xindex>, dense<> : tensor<0xindex>], result_layouts = [dense<0> : tensor<1xindex>, dense<> : tensor<0xindex>]} : (tensor<4xf32>, !stablehlo.token) -> (tensor<4xf32>, !stablehlo.token)
      %21 = "stablehlo.subtract"(%14, %17) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
      %22 = "stablehlo.add"(%13, %18) : (tensor<i32>, tensor<i32>) -> tensor<i32>
      "stablehlo.return"(%22, %21, %20#1, %16, %17, %18) : (tensor<i32>, tensor<4xf32>, !stablehlo.token, tensor<i32>, tensor<4xf32>, tensor<i32>) -> ()
    }) : (tensor<i32>, tensor<4xf32>, !stablehlo.token, tensor<i32>, tensor<4xf32>, tensor<i32>) -> (tensor<i32>, tensor<4xf32>, !stablehlo.token, tensor<i32>, tensor<4xf32>, tensor<i32>)
    "func.return"(%5#1) : (tensor<4xf32>) -> ()
  }
}
