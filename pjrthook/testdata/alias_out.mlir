module @nitro_optimizer attributes {stablehlo.num_replicas = 1,  stablehlo.num_partitions = 2} {
  sdy.mesh @mesh = <["data"=2]>
  func.func @main(%params_default_0: tensor<6xf32> {tf.aliasing_output = 0 : i32, sdy.sharding = #sdy.sharding<@mesh, [{}]> }, %grads_default_0: tensor<6xf32> { sdy.sharding = #sdy.sharding<@mesh, [{}]> }, %opt_default_0_adam_mu_0: tensor<6xf32> {tf.aliasing_output = 1 : i32, sdy.sharding = #sdy.sharding<@mesh, [{}]> }, %batch_x: tensor<4x6xf32> { sdy.sharding = #sdy.sharding<@mesh, [{"data"}, {}]> }, %step: tensor<f32> { sdy.sharding = #sdy.sharding<@mesh, []> }) -> (tensor<6xf32> { sdy.sharding = #sdy.sharding<@mesh, [{}]> }, tensor<6xf32> { sdy.sharding = #sdy.sharding<@mesh, [{}]> }, tensor<4x6xf32> { sdy.sharding = #sdy.sharding<@mesh, [{}, {}]> }) {
    %0 = "stablehlo.multiply"(%grads_default_0, %opt_default_0_adam_mu_0) : (tensor<6xf32>, tensor<6xf32>) -> tensor<6xf32>
    %1 = "stablehlo.subtract"(%params_default_0, %0) : (tensor<6xf32>, tensor<6xf32>) -> tensor<6xf32>
    "stablehlo.return"(%1, %0, %batch_x) : (tensor<6xf32>, tensor<6xf32>, tensor<4x6xf32>) -> ()
  }
}
