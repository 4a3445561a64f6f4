#!/bin/bash
# Here, once per checkout (needs the package indexes): the device pieces beyond the kit
# (../shared/device/kit.sh), each a part of at most 40 MiB so that one call carries one
# beside the checkout (~20 MiB; 64 MiB in all):
#
#   bash tests/gpu/prepare_extras.sh [kit] [win] [ray] [nb]   # .gl and those named (win,
#                                                              # ray, nb by default)
#
# - kit: ../shared/device/kit.sh's pieces (base, av, pnvc, ort0..5; run `kit.sh prepare
#   --with-ort` first) in one gzip tar split into .device/r0..N (kitpart*), its md5 in
#   .device/bin/kitall.md5, with onnxconverter-common (FP16) in .device/extra and ESRGAN
#   (benchmarks/superres.py) in .device/models. On the device: stash each rN into
#   /tmp/kit/parts, then cat, check the md5 and untar into /tmp/kit/stage
#   (docs/gpu-tests.md has the calls).
# - .gl: glvnd's loaders, unpacked to / on the device (the device tool's README)
# - win*: the real Qt window there (run_on_h200.sh window): Xvfb with Mesa for the X
#   server's own GLX, the X client libraries Qt's xcb plugin needs, fonts, PySide6
# - ray*: Ray and pyarrow with their dependencies (run_on_h200.sh archive: GPU actors)
# - nb*: numba and llvmlite (ByteTrack compiled; run_on_h200.sh installs them once)
# win, ray and nb are each one tar split into parts (winpart*, raypart*, nbpart*) with its
# md5 (win.md5, ...): run_on_h200.sh assembles a tar once all its parts were stashed.
set -euo pipefail
which=("$@"); [[ $# -gt 0 ]] || which=(win ray nb)
wants() { [[ " ${which[*]} " == *" $1 "* ]]; }
if wants kit; then
    root=$(git rev-parse --show-toplevel); cd "$root"
    for d in base av pnvc ort0; do
        [[ -d .device/$d ]] || { echo "kit: .device/$d missing: bash ../shared/device/kit.sh prepare --with-ort"; exit 2; }
    done
    rm -rf .device/r[0-9]* .device/extra .device/models; tmp=$(mktemp -d)
    tar -czf "$tmp/k.tgz" -C .device/base . -C ../av . -C ../pnvc . \
        $(for d in .device/ort[0-9]*; do echo "-C ../$(basename "$d") ."; done)
    md5sum < "$tmp/k.tgz" | cut -d' ' -f1 > .device/bin/kitall.md5
    (cd "$tmp" && split -b 40M -d k.tgz kitpart)
    i=0; for part in "$tmp"/kitpart*; do mkdir -p ".device/r$i"; mv "$part" ".device/r$i/"; i=$((i+1)); done
    rm -rf "$tmp"
    mkdir -p .device/extra .device/models
    .venv/bin/pip download -q --no-deps -d .device/extra onnxconverter-common
    cp ../shared/models/esrgan_thick_x2.onnx .device/models/
    du -sh .device/r[0-9]* .device/extra .device/models
    rest=(); for w in "${which[@]}"; do [[ $w == kit ]] || rest+=("$w"); done
    [[ ${#rest[@]} -gt 0 ]] || exit 0
    which=("${rest[@]}")
fi
root=$(git rev-parse --show-toplevel); cd "$root"
pip="$root/.venv/bin/pip"
PY=(--only-binary=:all: --python-version 3.12 --implementation cp)
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
o=(-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64)
mkdir -p /tmp/amd64/partial; apt-get "${o[@]}" update >/dev/null 2>&1 || true

grep -qx '/.gl/' .git/info/exclude 2>/dev/null || echo '/.gl/' >> .git/info/exclude
rm -rf .gl; mkdir -p .gl
(cd .gl && apt-get "${o[@]}" download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2 >/dev/null)

if wants win; then
# the X server, Mesa and the client libraries, without what the device image has
# (its base system), without glvnd's loaders (in .gl) and with one font (DejaVu) of
# fontconfig's alternatives
wanted=(xvfb x11-xkb-utils xkb-data libgl1-mesa-dri libglx-mesa0 libxkbcommon-x11-0
        libxcb-cursor0 libxcb-icccm4 libxcb-keysyms1 libxcb-image0 libxcb-render-util0
        libxcb-xinerama0 libxcb-randr0 libxcb-shape0 libxcb-xkb1 libfontconfig1 libdbus-1-3
        fonts-dejavu-core libx11-xcb1 libxrender1 libglib2.0-0 libmount1 libblkid1)
skip='^(libc6|libgcc-s1|libstdc\+\+6|libsystemd0|libselinux1|libpcre2-8-0|zlib1g|libzstd1|liblzma5|libbz2-1.0|libcap2|libgcrypt20|libgpg-error0|liblz4-1|libcrypt1|libtinfo6|libudev1|libaudit1|libaudit-common|libcap-ng0|debconf|dpkg|perl-base|tar|libacl1|libattr1|libgmp10|libffi8|libexpat1|libuuid1|libglvnd0|libgl1|libglx0|libegl1|libgles2|libopengl0|libvulkan1|libssl3t64|libssl3|coreutils|sensible-utils|base-files|libsmartcols1|util-linux|mount|libpam0g|libpam-modules|libpam-runtime|cdebconf|install-info|gcc-12-base|libdebian-installer4|libnewt0.52|libslang2|libtextwrap1|lsb-base|sysvinit-utils|libelogind0|fonts-croscore|fonts-freefont-otf|fonts-freefont-ttf|fonts-liberation|fonts-liberation2|fonts-texgyre|fonts-urw-base35|ttf-bitstream-vera)$'
mapfile -t pkgs < <(apt-cache "${o[@]}" depends --recurse --no-recommends --no-suggests \
    --no-conflicts --no-breaks --no-replaces --no-enhances "${wanted[@]}" 2>/dev/null \
    | grep -v '^ ' | grep -v '^<' | sort -u | grep -Ev "$skip")
mkdir -p "$work/win/debs" "$work/win/wheels"
(cd "$work/win/debs" && apt-get "${o[@]}" download "${pkgs[@]}" >/dev/null)
"$pip" download -q --no-deps "${PY[@]}" --platform manylinux_2_34_x86_64 \
    -d "$work/win/wheels" PySide6_Essentials==6.11.3 shiboken6==6.11.3
echo "win: ${#pkgs[@]} packages, $(du -sh "$work/win" | cut -f1)"
fi

if wants ray; then
# Ray and pyarrow (the archive's Parquet) with what they need, numpy aside (the device has it)
mkdir -p "$work/ray/wheels"
"$pip" download -q "${PY[@]}" --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux_2_28_x86_64 -d "$work/ray/wheels" ray==2.60.0 pyarrow==26.0.1 \
    2>&1 | grep -v "is ignored" || true
rm -f "$work"/ray/wheels/numpy-*.whl
echo "ray: $(ls "$work/ray/wheels" | wc -l) wheels, $(du -sh "$work/ray" | cut -f1)"
fi

if wants nb; then
# numba and llvmlite for the device's Python (its numpy is its own)
mkdir -p "$work/nb"
"$pip" download -q --no-deps "${PY[@]}" --platform manylinux_2_28_x86_64 -d "$work/nb" \
    numba==0.68.1 llvmlite==0.50.0
echo "nb: $(du -sh "$work/nb" | cut -f1)"
fi

for what in "${which[@]}"; do
    rm -rf .device/"$what"[0-9]*
    tar -C "$work/$what" -cf "$work/$what.tar" .
    md5sum "$work/$what.tar" | cut -d' ' -f1 > "$work/$what.md5"
    (cd "$work" && split -b 40M -d "$what.tar" "${what}part")
    i=0
    for part in "$work/${what}part"*; do
        mkdir -p ".device/$what$i"; mv "$part" ".device/$what$i/"; i=$((i+1))
    done
    cp "$work/$what.md5" ".device/${what}0/"
done
for what in "${which[@]}"; do du -sh .device/"$what"[0-9]*; done; du -sh .gl
