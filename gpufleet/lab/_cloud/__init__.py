"""The lab's cloud, inside the package so an installed gpufleet runs its lab
without a checkout: the Alibaba Cloud ECS emulator (aliyun.py) and the
loopback HTTP server every cloud emulator is built on (_server.py).

The project's tests import _server from here for their other clouds'
emulators (tests/emulators: tencent, huawei, aws), so there is one copy."""
