//! torchvision's ResNet with BasicBlocks, written with torchfn's modules as a PyTorch user ports
//! it: the same module tree and state_dict keys (`layer2.0.downsample.1.running_mean`), any
//! widths and blocks per layer (resnet18 is `[2, 2, 2, 2]` at widths 64/128/256/512).

use torchfn::nn::{
    AdaptiveAvgPool2d, BatchNorm2d, Conv2d, Forward, Layer, Linear, MaxPool2d, Module, ReLU, Sequential,
};
use torchfn::prelude::*;

fn conv(input: usize, output: usize, kernel: usize, stride: usize, padding: usize, g: &Generator) -> Result<Conv2d> {
    Conv2d::new(input, output, [kernel, kernel], [stride, stride], [padding, padding], [1, 1], 1, false, g)
}

/// Two 3×3 convolutions with a residual connection (`torchvision.models.resnet.BasicBlock`).
#[derive(Module)]
pub struct BasicBlock {
    conv1: Conv2d,
    bn1: BatchNorm2d,
    relu: ReLU,
    conv2: Conv2d,
    bn2: BatchNorm2d,
    downsample: Option<Sequential>,
}

impl BasicBlock {
    fn new(inplanes: usize, planes: usize, stride: usize, g: &Generator) -> Result<BasicBlock> {
        let downsample = if stride != 1 || inplanes != planes {
            let layers: Vec<Box<dyn Layer>> =
                vec![Box::new(conv(inplanes, planes, 1, stride, 0, g)?), Box::new(BatchNorm2d::new(planes)?)];
            Some(Sequential::new(layers))
        } else {
            None
        };
        Ok(BasicBlock {
            conv1: conv(inplanes, planes, 3, stride, 1, g)?,
            bn1: BatchNorm2d::new(planes)?,
            relu: ReLU::new(true),
            conv2: conv(planes, planes, 3, 1, 1, g)?,
            bn2: BatchNorm2d::new(planes)?,
            downsample,
        })
    }
}

impl Forward for BasicBlock {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let out = self.relu.call(&self.bn1.call(&self.conv1.call(x)?)?)?;
        let out = self.bn2.call(&self.conv2.call(&out)?)?;
        let identity = match &self.downsample {
            Some(d) => d.call(x)?,
            None => x.clone(),
        };
        self.relu.call(&(&out + &identity)?)
    }
}

/// ResNet with BasicBlocks (torchvision's wiring; the reference's `NarrowResNet` at its widths).
#[derive(Module)]
pub struct NarrowResNet {
    conv1: Conv2d,
    bn1: BatchNorm2d,
    relu: ReLU,
    maxpool: MaxPool2d,
    layer1: Sequential,
    layer2: Sequential,
    layer3: Sequential,
    layer4: Sequential,
    avgpool: AdaptiveAvgPool2d,
    fc: Linear,
}

impl NarrowResNet {
    /// `blocks[i]` BasicBlocks of `widths[i]` channels in layer `i + 1`, `num_classes` outputs.
    pub fn new(blocks: [usize; 4], widths: [usize; 4], num_classes: usize, g: &Generator) -> Result<NarrowResNet> {
        let mut inplanes = widths[0];
        let mut layer = |i: usize| -> Result<Sequential> {
            let stride = if i == 0 { 1 } else { 2 };
            let mut layers: Vec<Box<dyn Layer>> = Vec::new();
            for b in 0..blocks[i] {
                layers.push(Box::new(BasicBlock::new(inplanes, widths[i], if b == 0 { stride } else { 1 }, g)?));
                inplanes = widths[i];
            }
            Ok(Sequential::new(layers))
        };
        let (layer1, layer2, layer3, layer4) = (layer(0)?, layer(1)?, layer(2)?, layer(3)?);
        Ok(NarrowResNet {
            conv1: conv(3, widths[0], 7, 2, 3, g)?,
            bn1: BatchNorm2d::new(widths[0])?,
            relu: ReLU::new(true),
            maxpool: MaxPool2d::new(3, 2, 1),
            layer1,
            layer2,
            layer3,
            layer4,
            avgpool: AdaptiveAvgPool2d::new([1, 1]),
            fc: Linear::new(widths[3], num_classes, true, g)?,
        })
    }

    /// The mean cross-entropy of `logits` against class `labels` `[N]`.
    pub fn loss(logits: &Tensor, labels: &Tensor) -> Result<Tensor> {
        torchfn::nn::functional::cross_entropy(logits, labels, None, None, -100, None, "mean", 0.0)
    }
}

impl Forward for NarrowResNet {
    /// The logits `[N, num_classes]` for images `[N, 3, H, W]`.
    fn forward(&self, images: &Tensor) -> Result<Tensor> {
        let x = self.maxpool.call(&self.relu.call(&self.bn1.call(&self.conv1.call(images)?)?)?)?;
        let x = self.layer4.call(&self.layer3.call(&self.layer2.call(&self.layer1.call(&x)?)?)?)?;
        self.fc.call(&torchfn::flatten(&self.avgpool.call(&x)?, 1, -1)?)
    }
}
