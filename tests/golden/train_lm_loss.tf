#! --train
#! file lm_loss.tf
