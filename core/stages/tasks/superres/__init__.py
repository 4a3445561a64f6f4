"""Super-resolution: image agreement (PSNR/SSIM); the task itself comes next."""
