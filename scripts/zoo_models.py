"""Model families built here as torch modules (random weights), for the benchmarks and model tests.

    import zoo_models
    model = zoo_models.BUILDERS["yolo_det"]()        # an eval-ready torch.nn.Module

Each is a small, self-contained re-creation of a family that real deployments run, written the way
such models are usually written, so that the exported ONNX graph has that family's operator
pattern (not its trained weights):

  yolo_det     a YOLOv8-style detector: Conv-BN-SiLU everywhere, C2f blocks (Split, Bottlenecks,
               Concat), SPPF (three chained max pools), an FPN/PAN neck with nearest upsampling,
               decoupled box/class heads, a distribution-focal box decoding (Softmax over 16 bins
               and a fixed 1x1 conv) and sigmoid scores, concatenated into [B, 84, anchors].
  gpt2         a GPT-2-style decoder: token and position embeddings, pre-norm blocks with a fused
               QKV projection, causal masking through Where, GELU in its tanh form written out
               (as GPT-2's reference code does), tied output embedding; fixed sequence length.
  llama_tiny   a LLaMA-style decoder: RMSNorm written out (x * rsqrt(mean(x^2) + eps) * w), a
               SwiGLU MLP (SiLU(x W1) * x W3) and causal attention; fixed sequence length.
  bytecnn      a byte-sequence classifier: byte embeddings, 1-D convolutions written as 2-D
               ([B, C, L, 1] with Kx1 kernels), max pooling, dense layers.
  ocr_det      a DBNet-style text detector: a ResNet-18 trunk, an FPN (1x1 laterals, nearest
               upsampling and Add, 3x3 smoothing, upsampled to 1/4 and concatenated), a head of
               Conv-BN-ReLU and two ConvTranspose 2x2 stride 2, and a sigmoid probability map.

torch is imported by the caller (scripts/export_models.py) before anything here is used.
"""

import math

import torch
from torch import nn
import torch.nn.functional as F


# --- YOLO-style detector -----------------------------------------------------------------------

class _ConvBnSiLU(nn.Module):
    def __init__(self, c1, c2, k=1, s=1):
        super().__init__()
        self.conv = nn.Conv2d(c1, c2, k, s, k // 2, bias=False)
        self.bn = nn.BatchNorm2d(c2)

    def forward(self, x):
        return F.silu(self.bn(self.conv(x)))


class _Bottleneck(nn.Module):
    def __init__(self, c, shortcut):
        super().__init__()
        self.cv1 = _ConvBnSiLU(c, c, 3)
        self.cv2 = _ConvBnSiLU(c, c, 3)
        self.add = shortcut

    def forward(self, x):
        y = self.cv2(self.cv1(x))
        return x + y if self.add else y


class _C2f(nn.Module):
    def __init__(self, c1, c2, n=1, shortcut=False):
        super().__init__()
        self.c = c2 // 2
        self.cv1 = _ConvBnSiLU(c1, 2 * self.c, 1)
        self.cv2 = _ConvBnSiLU((2 + n) * self.c, c2, 1)
        self.m = nn.ModuleList(_Bottleneck(self.c, shortcut) for _ in range(n))

    def forward(self, x):
        y = list(self.cv1(x).split((self.c, self.c), 1))
        for m in self.m:
            y.append(m(y[-1]))
        return self.cv2(torch.cat(y, 1))


class _SPPF(nn.Module):
    def __init__(self, c1, c2, k=5):
        super().__init__()
        c_ = c1 // 2
        self.cv1 = _ConvBnSiLU(c1, c_, 1)
        self.cv2 = _ConvBnSiLU(c_ * 4, c2, 1)
        self.m = nn.MaxPool2d(k, 1, k // 2)

    def forward(self, x):
        x = self.cv1(x)
        y1 = self.m(x)
        y2 = self.m(y1)
        return self.cv2(torch.cat((x, y1, y2, self.m(y2)), 1))


class _DetectHead(nn.Module):
    """Decoupled heads per level; boxes decoded from 16-bin distributions (DFL)."""

    def __init__(self, channels, classes=80, reg_max=16):
        super().__init__()
        self.reg_max = reg_max
        self.classes = classes
        c2 = max(16, channels[0] // 4, 4 * reg_max)
        c3 = max(channels[0], classes)
        self.box = nn.ModuleList(
            nn.Sequential(_ConvBnSiLU(c, c2, 3), _ConvBnSiLU(c2, c2, 3), nn.Conv2d(c2, 4 * reg_max, 1))
            for c in channels)
        self.cls = nn.ModuleList(
            nn.Sequential(_ConvBnSiLU(c, c3, 3), _ConvBnSiLU(c3, c3, 3), nn.Conv2d(c3, classes, 1))
            for c in channels)
        self.dfl = nn.Conv2d(reg_max, 1, 1, bias=False)
        with torch.no_grad():
            self.dfl.weight.copy_(torch.arange(reg_max, dtype=torch.float32).view(1, reg_max, 1, 1))
        self.dfl.weight.requires_grad_(False)

    def forward(self, feats):
        b = feats[0].shape[0]
        no = 4 * self.reg_max + self.classes
        y = torch.cat([torch.cat((bx(f), cl(f)), 1).view(b, no, -1)
                       for f, bx, cl in zip(feats, self.box, self.cls)], 2)
        box, cls = y.split((4 * self.reg_max, self.classes), 1)
        a = box.shape[2]
        dist = self.dfl(box.view(b, 4, self.reg_max, a).transpose(2, 1).softmax(1)).view(b, 4, a)
        return torch.cat((dist, cls.sigmoid()), 1)


class YoloDetector(nn.Module):
    """YOLOv8-s-like widths (32 .. 512 channels) with v8-n depths."""

    def __init__(self, w=(32, 64, 128, 256, 512)):
        super().__init__()
        self.stem = nn.Sequential(_ConvBnSiLU(3, w[0], 3, 2), _ConvBnSiLU(w[0], w[1], 3, 2), _C2f(w[1], w[1], 1, True))
        self.p3 = nn.Sequential(_ConvBnSiLU(w[1], w[2], 3, 2), _C2f(w[2], w[2], 2, True))
        self.p4 = nn.Sequential(_ConvBnSiLU(w[2], w[3], 3, 2), _C2f(w[3], w[3], 2, True))
        self.p5 = nn.Sequential(_ConvBnSiLU(w[3], w[4], 3, 2), _C2f(w[4], w[4], 1, True), _SPPF(w[4], w[4]))
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.n4 = _C2f(w[4] + w[3], w[3])
        self.n3 = _C2f(w[3] + w[2], w[2])
        self.d3 = _ConvBnSiLU(w[2], w[2], 3, 2)
        self.o4 = _C2f(w[2] + w[3], w[3])
        self.d4 = _ConvBnSiLU(w[3], w[3], 3, 2)
        self.o5 = _C2f(w[3] + w[4], w[4])
        self.head = _DetectHead((w[2], w[3], w[4]))

    def forward(self, x):
        p3 = self.p3(self.stem(x))
        p4 = self.p4(p3)
        p5 = self.p5(p4)
        n4 = self.n4(torch.cat((self.up(p5), p4), 1))
        o3 = self.n3(torch.cat((self.up(n4), p3), 1))
        o4 = self.o4(torch.cat((self.d3(o3), n4), 1))
        o5 = self.o5(torch.cat((self.d4(o4), p5), 1))
        return self.head([o3, o4, o5])


# --- GPT-2-style decoder -----------------------------------------------------------------------

def _gelu_tanh(x):
    # GPT-2's gelu, written out as its reference code has it.
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


class _Gpt2Block(nn.Module):
    def __init__(self, d, heads, seq):
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(d)
        self.c_attn = nn.Linear(d, 3 * d)
        self.c_proj = nn.Linear(d, d)
        self.ln_2 = nn.LayerNorm(d)
        self.c_fc = nn.Linear(d, 4 * d)
        self.mlp_proj = nn.Linear(4 * d, d)
        self.register_buffer("bias", torch.tril(torch.ones(seq, seq, dtype=torch.bool)).view(1, 1, seq, seq))

    def _attn(self, x):
        b, t, d = x.shape
        q, k, v = self.c_attn(x).split(d, dim=2)
        hd = d // self.heads
        q = q.view(b, t, self.heads, hd).transpose(1, 2)
        k = k.view(b, t, self.heads, hd).transpose(1, 2)
        v = v.view(b, t, self.heads, hd).transpose(1, 2)
        w = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(hd)
        w = torch.where(self.bias[:, :, :t, :t], w, torch.tensor(-1e4, dtype=w.dtype))
        w = w.softmax(-1)
        y = torch.matmul(w, v).transpose(1, 2).reshape(b, t, d)
        return self.c_proj(y)

    def forward(self, x):
        x = x + self._attn(self.ln_1(x))
        return x + self.mlp_proj(_gelu_tanh(self.c_fc(self.ln_2(x))))


class Gpt2Decoder(nn.Module):
    """distilgpt2 sizes (6 layers, d=768, 12 heads) with an 8192-token vocabulary."""

    def __init__(self, layers=6, d=768, heads=12, vocab=8192, seq=128):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(seq, d)
        self.h = nn.ModuleList(_Gpt2Block(d, heads, seq) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        with torch.no_grad():
            for blk in self.h:
                for lin in (blk.c_attn, blk.c_proj, blk.c_fc, blk.mlp_proj):
                    lin.bias.uniform_(-0.1, 0.1)
                for norm in (blk.ln_1, blk.ln_2):
                    norm.weight.uniform_(0.8, 1.2)

    def forward(self, input_ids):
        pos = torch.arange(input_ids.shape[1], device=input_ids.device)
        x = self.wte(input_ids) + self.wpe(pos)
        for blk in self.h:
            x = blk(x)
        return torch.matmul(self.ln_f(x), self.wte.weight.t())


# --- LLaMA-style decoder -------------------------------------------------------------------------

class _RmsNorm(nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.empty(d).uniform_(0.8, 1.2))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class _LlamaBlock(nn.Module):
    def __init__(self, d, heads, ff, seq):
        super().__init__()
        self.heads = heads
        self.attn_norm = _RmsNorm(d)
        self.wq = nn.Linear(d, d, bias=False)
        self.wk = nn.Linear(d, d, bias=False)
        self.wv = nn.Linear(d, d, bias=False)
        self.wo = nn.Linear(d, d, bias=False)
        self.mlp_norm = _RmsNorm(d)
        self.w1 = nn.Linear(d, ff, bias=False)
        self.w3 = nn.Linear(d, ff, bias=False)
        self.w2 = nn.Linear(ff, d, bias=False)
        mask = torch.full((seq, seq), float("-inf")).triu(1)
        self.register_buffer("mask", mask.view(1, 1, seq, seq))

    def forward(self, x):
        b, t, d = x.shape
        hd = d // self.heads
        h = self.attn_norm(x)
        q = self.wq(h).view(b, t, self.heads, hd).transpose(1, 2)
        k = self.wk(h).view(b, t, self.heads, hd).transpose(1, 2)
        v = self.wv(h).view(b, t, self.heads, hd).transpose(1, 2)
        s = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(hd) + self.mask[:, :, :t, :t]
        y = torch.matmul(s.softmax(-1), v).transpose(1, 2).reshape(b, t, d)
        x = x + self.wo(y)
        h = self.mlp_norm(x)
        return x + self.w2(F.silu(self.w1(h)) * self.w3(h))


class LlamaDecoder(nn.Module):
    """4 layers, d=512, 8 heads, SwiGLU width 1376, 8192-token vocabulary."""

    def __init__(self, layers=4, d=512, heads=8, ff=1376, vocab=8192, seq=128):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.layers = nn.ModuleList(_LlamaBlock(d, heads, ff, seq) for _ in range(layers))
        self.norm = _RmsNorm(d)
        self.out = nn.Linear(d, vocab, bias=False)

    def forward(self, input_ids):
        x = self.tok(input_ids)
        for blk in self.layers:
            x = blk(x)
        return self.out(self.norm(x))


# --- byte-sequence classifier ------------------------------------------------------------------

class ByteCnn(nn.Module):
    """Embeddings [B, L] -> [B, 256, L, 1]; two Kx1 convolutions with pooling; two dense layers."""

    def __init__(self, vocab=1024, d=256, classes=16):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.conv1 = nn.Conv2d(d, d, (5, 1), padding=(2, 0))
        self.bn1 = nn.BatchNorm2d(d)
        self.conv2 = nn.Conv2d(d, d, (5, 1), padding=(2, 0))
        self.bn2 = nn.BatchNorm2d(d)
        self.conv3 = nn.Conv2d(d, 2 * d, (3, 1), padding=(1, 0))
        self.fc1 = nn.Linear(2 * d, d)
        self.fc2 = nn.Linear(d, classes)

    def forward(self, input_ids):
        x = self.emb(input_ids).transpose(1, 2).unsqueeze(-1)
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.max_pool2d(F.relu(self.bn2(self.conv2(x))), (2, 1))
        x = F.relu(self.conv3(x))
        x = torch.amax(x, dim=(2, 3))
        return self.fc2(F.relu(self.fc1(x)))


# --- DBNet-style OCR detector ------------------------------------------------------------------

class OcrDetector(nn.Module):
    def __init__(self, inner=128):
        super().__init__()
        import torchvision

        r = torchvision.models.resnet18(weights=None)
        self.stem = nn.Sequential(r.conv1, r.bn1, r.relu, r.maxpool)
        self.layers = nn.ModuleList([r.layer1, r.layer2, r.layer3, r.layer4])
        chans = (64, 128, 256, 512)
        self.lateral = nn.ModuleList(nn.Conv2d(c, inner, 1, bias=False) for c in chans)
        self.smooth = nn.ModuleList(nn.Conv2d(inner, inner // 4, 3, padding=1, bias=False) for _ in chans)
        q = inner // 4
        self.head = nn.Sequential(
            nn.Conv2d(inner, q, 3, padding=1, bias=False), nn.BatchNorm2d(q), nn.ReLU(),
            nn.ConvTranspose2d(q, q, 2, 2), nn.BatchNorm2d(q), nn.ReLU(),
            nn.ConvTranspose2d(q, 1, 2, 2))

    def forward(self, x):
        feats = []
        x = self.stem(x)
        for layer in self.layers:
            x = layer(x)
            feats.append(x)
        lat = [l(f) for l, f in zip(self.lateral, feats)]
        for i in range(3, 0, -1):
            lat[i - 1] = lat[i - 1] + F.interpolate(lat[i], scale_factor=2.0, mode="nearest")
        outs = [s(l) for s, l in zip(self.smooth, lat)]
        outs = [outs[0]] + [F.interpolate(o, scale_factor=float(2 ** i), mode="nearest")
                            for i, o in enumerate(outs[1:], start=1)]
        return torch.sigmoid(self.head(torch.cat(outs, 1)))


BUILDERS = {
    "yolo_det": YoloDetector,
    "gpt2": Gpt2Decoder,
    "llama_tiny": LlamaDecoder,
    "bytecnn": ByteCnn,
    "ocr_det": OcrDetector,
}
