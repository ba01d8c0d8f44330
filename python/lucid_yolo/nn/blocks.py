"""The layers of lucid's networks in PyTorch, one class per layer type of src/lucid/model/blocks.h,
with the C++ modules' child names (so a state dict of lucid weights loads name for name) and the
same forward arithmetic. These run the deployment formats that are traced from a Python module
(torchscript, aoti, executorch, coreml, litert) and nothing else: training stays in C++."""
import math

import torch
from torch import nn

BN_EPS = 1e-3  # kBatchNormEps
BN_MOMENTUM = 0.03


class Conv(nn.Module):
    """Convolution without bias, BatchNorm, then SiLU (act=True) or nothing."""

    def __init__(self, c1, c2, k=1, s=1, g=1, act=True):
        super().__init__()
        self.conv = nn.Conv2d(c1, c2, k, s, k // 2, groups=g, bias=False)
        self.bn = nn.BatchNorm2d(c2, eps=BN_EPS, momentum=BN_MOMENTUM)
        self.act = nn.SiLU() if act else nn.Identity()

    def forward(self, x):
        return self.act(self.bn(self.conv(x)))


def dw_conv(c1, c2, k=1, s=1, act=True):
    return Conv(c1, c2, k, s, math.gcd(c1, c2), act)


class Bottleneck(nn.Module):
    def __init__(self, c1, c2, shortcut=True, g=1, k1=3, k2=3, e=0.5):
        super().__init__()
        c_ = int(c2 * e)
        self.cv1 = Conv(c1, c_, k1, 1)
        self.cv2 = Conv(c_, c2, k2, 1, g)
        self.add = shortcut and c1 == c2

    def forward(self, x):
        y = self.cv2(self.cv1(x))
        return x + y if self.add else y


class C3(nn.Module):
    def __init__(self, c1, c2, n=1, shortcut=True, g=1, e=0.5, k=0):
        super().__init__()
        c_ = int(c2 * e)
        self.cv1 = Conv(c1, c_, 1, 1)
        self.cv2 = Conv(c1, c_, 1, 1)
        self.cv3 = Conv(2 * c_, c2, 1)
        ks = (k, k) if k > 0 else (1, 3)
        self.m = nn.Sequential(*(Bottleneck(c_, c_, shortcut, g, *ks, 1.0) for _ in range(n)))

    def forward(self, x):
        return self.cv3(torch.cat((self.m(self.cv1(x)), self.cv2(x)), 1))


class Attention(nn.Module):
    """Multi-head attention over the H x W positions."""

    def __init__(self, dim, num_heads, attn_ratio=0.5):
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.key_dim = int(self.head_dim * attn_ratio)
        self.scale = self.key_dim ** -0.5
        self.qkv = Conv(dim, dim + self.key_dim * num_heads * 2, 1, 1, 1, False)
        self.proj = Conv(dim, dim, 1, 1, 1, False)
        self.pe = Conv(dim, dim, 3, 1, dim, False)

    def forward(self, x):
        b, c, h, w = x.shape
        q, k, v = self.qkv(x).view(b, self.num_heads, self.key_dim * 2 + self.head_dim, h * w).split(
            [self.key_dim, self.key_dim, self.head_dim], dim=2)
        attn = ((q * self.scale).transpose(-2, -1) @ k).softmax(dim=-1)
        y = (v @ attn.transpose(-2, -1)).view(b, c, h, w) + self.pe(v.reshape(b, c, h, w))
        return self.proj(y)


class PSABlock(nn.Module):
    def __init__(self, c, attn_ratio=0.5, num_heads=4, shortcut=True):
        super().__init__()
        self.attn = Attention(c, num_heads, attn_ratio)
        self.ffn = nn.Sequential(Conv(c, c * 2, 1), Conv(c * 2, c, 1, act=False))
        self.add = shortcut

    def forward(self, x):
        y = x + self.attn(x) if self.add else self.attn(x)
        return y + self.ffn(y) if self.add else self.ffn(y)


class C2f(nn.Module):
    """C2f and C3k2: cv1 split in two, inner blocks chained on the last part, all parts joined by cv2.
    inner: "bottleneck3x3" (C2f), "bottleneck", "c3k" or "psa" (C3k2's kinds)."""

    def __init__(self, c1, c2, n=1, shortcut=False, g=1, e=0.5, inner="bottleneck3x3"):
        super().__init__()
        self.c = int(c2 * e)
        c_ = self.c
        self.cv1 = Conv(c1, 2 * c_, 1, 1)
        self.cv2 = Conv((2 + n) * c_, c2, 1)

        def block():
            if inner == "bottleneck3x3":
                return Bottleneck(c_, c_, shortcut, g, 3, 3, 1.0)
            if inner == "bottleneck":
                return Bottleneck(c_, c_, shortcut, g)
            if inner == "c3k":
                return C3(c_, c_, 2, shortcut, g, 0.5, 3)
            return nn.Sequential(Bottleneck(c_, c_, shortcut, g), PSABlock(c_, 0.5, max(c_ // 64, 1)))

        self.m = nn.ModuleList(block() for _ in range(n))

    def forward(self, x):
        parts = list(self.cv1(x).chunk(2, 1))
        for m in self.m:
            parts.append(m(parts[-1]))
        return self.cv2(torch.cat(parts, 1))


class SPPF(nn.Module):
    def __init__(self, c1, c2, k=5, n=3, shortcut=False, cv1_act=True):
        super().__init__()
        c_ = c1 // 2
        self.n = n
        self.cv1 = Conv(c1, c_, 1, 1, act=cv1_act)
        self.cv2 = Conv(c_ * (n + 1), c2, 1, 1)
        self.m = nn.MaxPool2d(k, 1, k // 2)
        self.add = shortcut and c1 == c2

    def forward(self, x):
        y = [self.cv1(x)]
        for _ in range(self.n):
            y.append(self.m(y[-1]))
        out = self.cv2(torch.cat(y, 1))
        return out + x if self.add else out


class C2PSA(nn.Module):
    def __init__(self, c1, c2, n=1, e=0.5):
        super().__init__()
        if c1 != c2:
            raise ValueError("C2PSA needs equal input and output channels")
        self.c = int(c1 * e)
        self.cv1 = Conv(c1, 2 * self.c, 1, 1)
        self.cv2 = Conv(2 * self.c, c1, 1)
        self.m = nn.Sequential(*(PSABlock(self.c, 0.5, max(self.c // 64, 1)) for _ in range(n)))

    def forward(self, x):
        a, b = self.cv1(x).split((self.c, self.c), 1)
        return self.cv2(torch.cat((a, self.m(b)), 1))


class Concat(nn.Module):
    def __init__(self, dim=1):
        super().__init__()
        self.dim = dim

    def forward(self, xs):
        return torch.cat(xs, self.dim)


class Upsample(nn.Module):
    """Nearest-neighbour upsampling by an integer factor."""

    def __init__(self, scale=2.0):
        super().__init__()
        self.scale = float(scale)

    def forward(self, x):
        return nn.functional.interpolate(x, scale_factor=self.scale, mode="nearest")


class DFL(nn.Module):
    """The expectation over reg_max bins of each box side: (B, 4 * reg_max, A) -> (B, 4, A)."""

    def __init__(self, c1=16):
        super().__init__()
        self.c1 = c1
        self.conv = nn.Conv2d(c1, 1, 1, bias=False).requires_grad_(False)
        self.conv.weight.data[:] = torch.arange(c1, dtype=torch.float).view(1, c1, 1, 1)

    def forward(self, x):
        b, _, a = x.shape
        return self.conv(x.view(b, 4, self.c1, a).transpose(2, 1).softmax(1)).view(b, 4, a)


class Proto(nn.Module):
    """Mask prototypes from P3: conv, 2x transposed conv, conv, 1x1 to nm channels."""

    def __init__(self, c1, c_=256, c2=32):
        super().__init__()
        self.cv1 = Conv(c1, c_, 3)
        self.upsample = nn.ConvTranspose2d(c_, c_, 2, 2, 0, bias=True)
        self.cv2 = Conv(c_, c_, 3)
        self.cv3 = Conv(c_, c2)

    def forward(self, x):
        return self.cv3(self.cv2(self.upsample(self.cv1(x))))


class Proto26(Proto):
    """YOLO26's prototypes: P4 and P5 refined to P3's channels, upsampled and added onto P3 first.
    The semantic branch (semseg) serves training only; it is kept for the state dict's names."""

    def __init__(self, ch, c_=256, c2=32, nc=80):
        super().__init__(c_, c_, c2)
        self.feat_refine = nn.ModuleList(Conv(x, ch[0], 1) for x in ch[1:])
        self.feat_fuse = Conv(ch[0], c_, 3)
        self.semseg = nn.Sequential(Conv(ch[0], c_, 3), Conv(c_, c_, 3), nn.Conv2d(c_, nc, 1))

    def forward(self, xs):
        feat = xs[0]
        for i, refine in enumerate(self.feat_refine):
            feat = feat + nn.functional.interpolate(refine(xs[i + 1]), scale_factor=float(2 ** (i + 1)), mode="nearest")
        return super().forward(self.feat_fuse(feat))


def fold_batch_norms(module):
    """Every Conv's BatchNorm folded into its kernel and bias (computed in FP64), as deployed models
    are: the Conv then runs conv (with bias) and its activation only."""
    for m in module.modules():
        if isinstance(m, Conv) and isinstance(m.bn, nn.BatchNorm2d):
            conv, bn = m.conv, m.bn
            scale = bn.weight.double() / (bn.running_var.double() + bn.eps).sqrt()
            fused = nn.Conv2d(conv.in_channels, conv.out_channels, conv.kernel_size, conv.stride, conv.padding,
                              conv.dilation, conv.groups, bias=True).requires_grad_(False)
            fused.weight.copy_((conv.weight.double() * scale.view(-1, 1, 1, 1)).to(conv.weight.dtype))
            fused.bias.copy_(((-bn.running_mean.double()) * scale + bn.bias.double()).to(conv.weight.dtype))
            m.conv, m.bn = fused, nn.Identity()
    return module
