"""Where each on-disk dataset comes from: its publisher's files, the checksums recorded for them, and how they
make the folder its reader reads (docs/reproducing-the-paper.md#fetching-the-datasets-and-weights lists where
each checksum was found).

A sha256 is recorded where one was published or recorded by a public project; an md5 where the publisher (or
the loaders that read the dataset) give only that. Files without a public URL (a licence or login in the way, or a
site that no longer serves them) have `url=None`: bench says where to get them, and a mirror (a folder holding
what the user downloaded) serves them, verified all the same.
"""
from __future__ import annotations

from dataclasses import dataclass

from bench.core.download import RemoteFile


@dataclass(frozen=True)
class Part:
    """A file of a dataset: an archive unpacked into `into` (a folder relative to the folder the dataset is
    assembled in), or a plain file placed there (`unpack=False`)."""

    file: RemoteFile
    into: str = ""
    unpack: bool = True


@dataclass(frozen=True)
class DatasetSource:
    """`folder` is what the parts make at the top level and what is moved into the data root, whole, once the
    reader has read it; `by_hand` says where to get the files that have no public URL."""

    folder: str
    parts: tuple[Part, ...]
    homepage: str
    by_hand: str = ""

    @property
    def files(self) -> tuple[RemoteFile, ...]:
        return tuple(p.file for p in self.parts)


TORONTO = "https://www.cs.toronto.edu/~kriz"

DATASET_SOURCES: dict[str, DatasetSource] = {
    # sha256: pytorch/vision torchvision/prototype/datasets/_builtin/cifar.py; md5: torchvision/datasets/cifar.py
    "cifar10": DatasetSource("cifar-10-batches-py", (Part(RemoteFile(
        "cifar-10-python.tar.gz", f"{TORONTO}/cifar-10-python.tar.gz",
        sha256="6d958be074577803d12ecdefd02955f39262c83c16fe9348329d7fe0b5c001ce",
        md5="c58f30108f718f92721af3b95e74349a")),), f"{TORONTO}/cifar.html"),
    "cifar100": DatasetSource("cifar-100-python", (Part(RemoteFile(
        "cifar-100-python.tar.gz", f"{TORONTO}/cifar-100-python.tar.gz",
        sha256="85cd44d02ba6437773c5bbd22e183051d648de2e7d6b014e1ef29b855ba677a7",
        md5="eb9058c3a382ffc7106e4002c42a8d85")),), f"{TORONTO}/cifar.html"),
    # md5 only: ContinualAI/avalanche avalanche/benchmarks/datasets/tiny_imagenet/tiny_imagenet.py (and many loaders)
    "tinyimagenet": DatasetSource("tiny-imagenet-200", (Part(RemoteFile(
        "tiny-imagenet-200.zip", "https://cs231n.stanford.edu/tiny-imagenet-200.zip",
        md5="90528d7ca1a48142e341f4ef8d21d0de")),), "https://cs231n.stanford.edu/"),
    # sha256: tensorflow/datasets tensorflow_datasets/url_checksums/caltech_birds2011.txt (the same file on Google
    # Drive); md5: pytorch/vision torchvision/datasets/cub2011.py. The archive also holds attributes.txt, unused.
    "cub200": DatasetSource("CUB_200_2011", (Part(RemoteFile(
        "CUB_200_2011.tgz", "https://data.caltech.edu/records/65de6-vp158/files/CUB_200_2011.tgz?download=1",
        sha256="0c685df5597a8b24909f6a7c9db6d11e008733779a671760afef78feb49bf081",
        md5="97eceeb196236b17998738112f37df78")),), "https://www.vision.caltech.edu/datasets/cub_200_2011/"),
    # md5 only, the challenge's own: visipedia/herbarium_comp 2019/README_2019.md; its terms of use come first
    "herbarium19": DatasetSource("herbarium_19", (
        Part(RemoteFile("small-train.tar.gz", None, md5="8bf1985008dea8f79da1d9668b065543"), into="herbarium_19"),
        Part(RemoteFile("small-validation.tar.gz", None, md5="d7e8670238a54f13b8b729823a988004"),
             into="herbarium_19")),
        "https://www.kaggle.com/c/herbarium-2019-fgvc6",
        by_hand="accept the challenge's terms of use (https://www.kaggle.com/c/herbarium-2019-fgvc6) and download "
                "small-train.tar.gz and small-validation.tar.gz (the links of https://github.com/visipedia/"
                "herbarium_comp/blob/master/2019/README_2019.md) into a folder, then give it as --mirror DIR"),
    # sha256: tensorflow/datasets tensorflow_datasets/url_checksums/fgvc.txt
    "aircraft": DatasetSource("fgvc-aircraft-2013b", (Part(RemoteFile(
        "fgvc-aircraft-2013b.tar.gz",
        "https://www.robots.ox.ac.uk/~vgg/data/fgvc-aircraft/archives/fgvc-aircraft-2013b.tar.gz",
        sha256="d5f68b1b81d6d7831eb9d5c5517074176b5dfbce6bcb43dc14ed1c66a87b8d75")),),
        "https://www.robots.ox.ac.uk/~vgg/data/fgvc-aircraft/"),
    # sha256: tensorflow/datasets tensorflow_datasets/url_checksums/cars196.txt. The publisher's site
    # (ai.stanford.edu/~jkrause/cars) no longer serves them (pytorch/vision torchvision/datasets/stanford_cars.py).
    "cars": DatasetSource("stanford_cars", (
        Part(RemoteFile("cars_train.tgz", None,
                        sha256="512b227b30e2f0a8aab9e09485786ab4479582073a144998da74d64b801fd288"), "stanford_cars"),
        Part(RemoteFile("cars_test.tgz", None,
                        sha256="bffea656d6f425cba3c91c6d83336e4c5f86c6cffd8975b0f375d3a10da8e243"), "stanford_cars"),
        Part(RemoteFile("car_devkit.tgz", None,
                        sha256="b97deb463af7d58b6bfaa18b2a4de9829f0f79e8ce663dfa9261bf7810e9accd"), "stanford_cars"),
        Part(RemoteFile("cars_test_annos_withlabels.mat", None,
                        sha256="790f75be8ea34eeded134cc559332baf23e30e91367e9ddca97d26ed9b895f05"),
             "stanford_cars/devkit", unpack=False)),
        "https://ai.stanford.edu/~jkrause/cars/car_dataset.html",
        by_hand="its publisher's site no longer serves it: put cars_train.tgz, cars_test.tgz, car_devkit.tgz and "
                "cars_test_annos_withlabels.mat (copies are on Kaggle, e.g. as torchvision's StanfordCars docstring "
                "says) in a folder and give it as --mirror DIR; they are checked against the sha256 TFDS recorded"),
    "imagenet100": DatasetSource("imagenet", (), "https://image-net.org/download.php",
                                 by_hand="ImageNet needs a login: download ILSVRC2012_img_train.tar and "
                                         "ILSVRC2012_img_val.tar from https://image-net.org/download.php and unpack "
                                         "them into imagenet/train/<wnid>/ and imagenet/val/<wnid>/ (the validation "
                                         "images sorted into their class folders: torchvision ImageFolder's layout)"),
    # no checksum is published for its files, so bench does not download them unverified: fetched by hand
    "domainnet": DatasetSource("domainnet", (), "http://ai.bu.edu/M3SDA/",
                               by_hand="download the domains' zips (the cleaned clipart.zip and painting.zip) and their "
                                       "<domain>_train.txt and <domain>_test.txt lists from http://ai.bu.edu/M3SDA/, "
                                       "and unpack each zip into domainnet/ (domainnet/<domain>/<class>/<image>.jpg), "
                                       "the lists beside the folders or in domainnet/splits/"),
}

# What the paper's grids read (docs/reproducing-the-paper.md): `bench data fetch paper` fetches these.
PAPER_DATASETS = ("cifar10", "cifar100", "tinyimagenet", "cub200", "herbarium19")
