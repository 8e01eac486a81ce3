#!/bin/sh
# Shrink a debootstrapped rootfs before `docker import`: package caches, lists, docs, man pages, locales.
set -eu
root="$1"
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/cache/apt/*.bin \
       "$root"/var/lib/apt/lists/* \
       "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/info/* \
       "$root"/var/log/*.log "$root"/var/log/apt/* "$root"/tmp/* "$root"/var/tmp/*
find "$root"/usr/share/locale -mindepth 1 -maxdepth 1 ! -name 'en*' ! -name 'locale.alias' -exec rm -rf {} +
# no services may start inside the image build or containers
printf '#!/bin/sh\nexit 101\n' > "$root"/usr/sbin/policy-rc.d
chmod 755 "$root"/usr/sbin/policy-rc.d
